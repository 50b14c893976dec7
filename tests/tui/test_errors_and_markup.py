"""Errors become notifications with the chat and input intact; model output is always literal."""

from __future__ import annotations

import pytest
from textual.widgets import Markdown

from ember.tui.app import EmberApp
from ember.tui.screens.chat.screen import ChatScreen
from ember.tui.widgets.message_view import MessageView
from ember.tui.widgets.prompt_input import PromptInput

from .conftest import SIZE, screen_text, send, wait_for, wait_idle

pytestmark = pytest.mark.anyio

NASTY = (
    "Look: [/] [link=https://evil.example]x[/link] [bold red]loud[/] \x1b[31mred\x1b[0m \x07 done"
)


def _notes(app: EmberApp) -> list[str]:
    return [str(n.message) for n in app._notifications]


async def test_markup_and_ansi_in_reply_render_literally(make_app, history, backends) -> None:
    backends.script.replies = [NASTY]
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "[bold]not bold[/] \x1b[2J")
        await wait_idle(pilot)
        chat = app.screen
        assert isinstance(chat, ChatScreen)
        boxes = chat.query_one(MessageView).boxes()
        assert boxes[1].text == NASTY  # stored and kept exactly
        shown = boxes[1].query_one(Markdown).source
        assert "[link=https://evil.example]x[/link]" in shown and "[bold red]loud[/]" in shown
        assert "\x1b" not in shown and "\u241b[31mred" in shown and "\u2407" in shown
        # what reaches the screen: the brackets are there as text, no escape byte is written
        text = screen_text(app)
        assert "[link=https://evil.example]x[/link]" in text and "[bold red]loud[/]" in text
        assert "[bold]not bold[/]" in text
        assert "\x1b" not in text and "\u241b[31mred" in text
        assert chat.session.conversation is not None
        assert history.path(chat.session.conversation.id)[1].content == NASTY


async def test_generation_error_notifies_and_keeps_chat(make_app, history, backends) -> None:
    backends.script.replies = ["one two three four"]
    backends.script.fail_after_tokens = 2
    backends.script.error = "CUDA out of [memory]"
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "hello")
        await wait_idle(pilot)
        chat = app.screen
        prompt = chat.query_one(PromptInput)
        prompt.load_text("draft in progress")
        await wait_for(pilot, lambda: any("CUDA out of [memory]" in n for n in _notes(app)))
        path = history.path(chat.session.conversation.id)
        assert [(m.role, m.status, m.content) for m in path] == [
            ("user", "complete", "hello"),
            ("assistant", "error", "one two"),
        ]
        assert prompt.text == "draft in progress"
        # the next turn works once the engine does
        backends.script.fail_after_tokens = None
        await pilot.press("ctrl+r")
        await wait_idle(pilot)
        assert history.path(chat.session.conversation.id)[-1].status == "complete"


async def test_model_load_failure_notifies(make_app, history, backends) -> None:
    backends.fail = "model.gguf: not a GGUF file (bad magic)"
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "hello?")
        await wait_idle(pilot)
        await wait_for(pilot, lambda: any("bad magic" in n for n in _notes(app)))
        chat = app.screen
        assert [m.content for m in history.path(chat.session.conversation.id)] == ["hello?", ""]
        assert [b.message.role for b in chat.query_one(MessageView).boxes()] == [
            "user",
            "assistant",
        ]
        backends.fail = ""
        await pilot.press("ctrl+r")
        await wait_idle(pilot)
        assert history.path(chat.session.conversation.id)[-1].content == "Hello **there**, friend."


async def test_sending_while_streaming_is_refused_and_keeps_input(make_app, backends) -> None:
    backends.script.replies = ["word " * 3000]
    backends.script.tokens_per_s = 100
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "first")
        chat = app.screen
        await wait_for(pilot, lambda: chat.session.reply is not None and chat.session.reply.text)
        await send(pilot, "second")
        assert chat.query_one(PromptInput).text == "second"
        assert any("Esc" in n for n in _notes(app))
        await pilot.press("escape")
        await wait_idle(pilot)


async def test_corrupt_history_notice_is_shown(make_app, history) -> None:
    history.notice = "history database x was unreadable (file is not a database); moved it to y"
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: any("moved it to y" in n for n in _notes(app)))
