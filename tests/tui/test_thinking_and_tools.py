"""Reasoning shown apart (collapsed, stored, not sent back), the per-chat thinking switch, and tool
calls through a real MCP server (tests/tui/mcp_server.py over stdio): shown, run only once the
user confirms in the consent dialog (tests/tui/test_tool_consent.py: what cannot answer it),
their results sent back as tool turns."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.widgets import Markdown

from ember.app.config import load_settings
from ember.app.mcp.config import McpServerConfig
from ember.app.mcp.hub import McpHub
from ember.tui.app import EmberApp
from ember.tui.screens.chat.screen import ChatScreen
from ember.tui.screens.tool_consent import ToolConsentDialog
from ember.tui.toolbox import McpToolbox
from ember.tui.widgets.message_view import MessageBox, MessageView
from ember.tui.widgets.reply_views import ThinkingView, ToolCallView

from .conftest import SIZE, ConsentClock, screen_text, send, wait_for, wait_idle

pytestmark = pytest.mark.anyio

SERVER = Path(__file__).with_name("mcp_server.py")
ADD_CALL = '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 40}}\n</tool_call>'
CONNECT_S = 90.0  # the first tool listing starts the server (imports the mcp package)


def _chat(app: EmberApp) -> ChatScreen:
    screen = app.screen
    assert isinstance(screen, ChatScreen)
    return screen


def _reply_box(app: EmberApp) -> MessageBox:
    return _chat(app).query_one(MessageView).boxes()[-1]


async def test_thinking_is_shown_apart_stored_and_not_sent_back(make_app, history, backends):
    backends.script.replies = ["<think>Rain is water falling.</think>Rain falls softly."]
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "Haiku about rain")
        await wait_idle(pilot)
        box = _reply_box(app)
        (thinking,) = box.query(ThinkingView)
        assert thinking.collapsed and thinking.text == "Rain is water falling."
        assert "Thinking (4 words)" in screen_text(app)
        assert "Rain is water falling." not in screen_text(app)  # collapsed
        assert box.query_one(Markdown).source == "Rain falls softly."
        reply = _chat(app).session.path()[-1]
        assert reply.content == "Rain falls softly."
        assert [(p.kind, p.text) for p in reply.parts] == [
            ("reasoning", "Rain is water falling."),
            ("text", "Rain falls softly."),
        ]
        await pilot.press("ctrl+up")  # focus the reply; t shows its thinking
        await wait_for(pilot, lambda: app.focused is box)
        await pilot.press("t")
        await wait_for(pilot, lambda: not thinking.collapsed)
        await wait_for(pilot, lambda: "Rain is water falling." in screen_text(app))
        await send(pilot, "Another")
        await wait_idle(pilot)
        assert [m.content for m in backends.last.requests[-1].messages] == [
            "Haiku about rain",
            "Rain falls softly.",
            "Another",
        ]
    # reopened, the stored reply shows its thinking apart again
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: len(_chat(app).query_one(MessageView).boxes()) == 4)
        assert _chat(app).query_one(MessageView).boxes()[1].query(ThinkingView)


async def test_thinking_switch_reaches_the_template(make_app, backends) -> None:
    backends.script.thinking_switch = True
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "one")
        await wait_idle(pilot)
        assert backends.last.requests[-1].template_kwargs == {}  # the template's default
        await pilot.press("f5")
        assert _chat(app).session.thinking is False
        await send(pilot, "two")
        await wait_idle(pilot)
        assert backends.last.requests[-1].template_kwargs == {"enable_thinking": False}
        await pilot.press("f5")
        await send(pilot, "three")
        await wait_idle(pilot)
        assert backends.last.requests[-1].template_kwargs == {"enable_thinking": True}


async def test_a_model_without_the_switch_says_so(make_app, backends) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "hi")
        await wait_idle(pilot)
        await pilot.press("f5")
        await wait_for(pilot, lambda: len(app._notifications) > 0)
        (note,) = list(app._notifications)
        assert note.title == "Thinking" and "has no thinking switch" in str(note.message)
        assert _chat(app).session.thinking is None


@pytest.fixture
def toolbox(tmp_path: Path) -> Iterator[McpToolbox]:
    config = McpServerConfig(
        "calc",
        command=sys.executable,
        args=(str(SERVER),),
        env={"EMBER_MCP_CALLS": str(tmp_path / "calls.txt")},
    )
    box = McpToolbox(McpHub([config], tmp_path / "logs"))
    yield box
    box.close()


def _calls(tmp_path: Path) -> list[str]:
    path = tmp_path / "calls.txt"
    return path.read_text().splitlines() if path.exists() else []


async def _asking(pilot, app: EmberApp, clock: ConsentClock) -> ToolCallView:
    """The consent dialog is up (and past its debounce); the call's view waits."""
    await wait_for(pilot, lambda: isinstance(app.screen, ToolConsentDialog), CONNECT_S)
    clock.pass_debounce()
    chat = next(s for s in app.screen_stack if isinstance(s, ChatScreen))
    return next(v for v in chat.query(ToolCallView) if v.asking)


async def test_a_confirmed_call_runs_and_the_model_goes_on(
    make_app, backends, toolbox, tmp_path, consent_clock
) -> None:
    backends.script.replies = [f"<think>Use the tool.</think>Let me add. {ADD_CALL}", "42."]
    app = make_app(toolbox=toolbox)
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "What is 2 + 40?")
        view = await _asking(pilot, app, consent_clock)
        first = backends.last.requests[0]
        assert {t.name for t in first.tools} == {"add", "capital", "broken"}
        assert _calls(tmp_path) == []  # nothing runs before the user says so
        # the view asks before the screen has drawn it: wait for the drawing, not just the state
        shown = 'add({"a": 2, "b": 40})'
        await wait_for(pilot, lambda: shown in (t := screen_text(app)) and "Ctrl+Y: run" in t)
        await pilot.press("ctrl+y")
        await wait_idle(pilot)
        assert _calls(tmp_path) == ["add 2 40"]
        second = backends.last.requests[1]
        assistant, tool = second.messages[-2:]
        assert assistant.role == "assistant" and assistant.content == "Let me add. "
        # the calling turn's reasoning goes back with it (a harmony template keeps it in view)
        assert assistant.reasoning == "Use the tool."
        assert [(c.name, c.arguments_dict) for c in assistant.tool_calls] == [
            ("add", {"a": 2, "b": 40})
        ]
        assert (tool.role, tool.content, tool.name) == ("tool", "42", "add")
        assert tool.tool_call_id == assistant.tool_calls[0].id
        reply = _chat(app).session.path()[-1]
        assert reply.status == "complete"
        assert reply.content == "Let me add. 42."
        assert [(p.kind, p.status) for p in reply.parts] == [
            ("reasoning", ""), ("text", ""), ("tool_call", ""), ("tool_result", "ok"), ("text", ""),
        ]  # fmt: skip
        assert view.result is not None and view.result.text == "42"
        assert "ran: 2 characters back" in screen_text(app)


async def test_denied_call_does_not_run_and_always_allow_is_for_this_machine(
    make_app, backends, toolbox, tmp_path, consent_clock
) -> None:
    backends.script.replies = [ADD_CALL, "I was not allowed."]
    app = make_app(toolbox=toolbox)
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "add please")
        await _asking(pilot, app, consent_clock)
        await pilot.press("escape")
        await wait_idle(pilot)
        assert _calls(tmp_path) == []
        tool = backends.last.requests[1].messages[-1]
        assert (tool.role, tool.content) == ("tool", "The user did not allow this call.")
        backends.script.replies = [ADD_CALL, "42 it is."]
        backends.last._replies = iter(backends.script.replies)
        await send(pilot, "now you may")
        await _asking(pilot, app, consent_clock)
        await pilot.press("ctrl+t")  # run, and always allow calc/add on this machine
        await wait_idle(pilot)
        assert _calls(tmp_path) == ["add 2 40"]
        conversation = _chat(app).session.conversation
        assert conversation is not None and "allowed_tools" not in conversation.settings
        assert load_settings(env={}).extra["allowed_tools"] == ["calc/add"]
        backends.last._replies = iter([ADD_CALL, "Again 42."])
        await send(pilot, "once more")
        await wait_idle(pilot)  # no question this time
        assert _calls(tmp_path) == ["add 2 40", "add 2 40"]
        assert _chat(app).session.path()[-1].content == "Again 42."
        await pilot.press("ctrl+n")  # another chat: the machine's allow-list holds there too
        backends.last._replies = iter([ADD_CALL, "ok"])
        await send(pilot, "add in a new chat")
        await wait_idle(pilot)
        assert _calls(tmp_path) == ["add 2 40"] * 3
        assert not isinstance(app.screen, ToolConsentDialog)
