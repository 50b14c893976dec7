"""Ctrl+C in the chat app: it stops a streaming reply as Esc does, a second Ctrl+C quits, and
the footer says so; with text selected it copies, as terminals do."""

from __future__ import annotations

import pytest

from ember.tui.screens.chat.screen import ChatScreen
from ember.tui.widgets.prompt_input import PromptInput

from .conftest import SIZE, screen_text, send, wait_for

pytestmark = pytest.mark.anyio


async def test_ctrl_c_stops_the_reply_and_a_second_ctrl_c_quits(
    make_app, history, backends
) -> None:
    backends.script.replies = ["word " * 5000]
    backends.script.tokens_per_s = 100
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        footer = screen_text(app).splitlines()[-1]
        assert "^c Stop/quit" in footer
        await send(pilot, "go")
        chat = app.screen
        assert isinstance(chat, ChatScreen)
        await wait_for(pilot, lambda: chat.session.reply is not None and chat.session.reply.text)
        assert chat.session.conversation is not None
        conv_id = chat.session.conversation.id
        await pilot.press("ctrl+c")
        await wait_for(pilot, lambda: not app.session.busy)
        reply = history.path(conv_id)[-1]
        assert reply.status == "stopped" and reply.content  # what Esc does
        assert app.is_running  # the first Ctrl+C only stopped the reply
        await pilot.press("ctrl+c")
        await wait_for(pilot, lambda: app._exit)
    assert app.return_code == 0


async def test_ctrl_c_when_idle_warns_first_and_an_old_press_does_not_count(make_app) -> None:
    app = make_app()
    app.QUIT_AGAIN_S = 0.0  # the first press is stale by the second
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert not app._exit
        assert any("Ctrl+C again to quit" in str(n.message) for n in app._notifications)
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert not app._exit  # more than QUIT_AGAIN_S apart: warned again, still running
        app.QUIT_AGAIN_S = 60.0
        await pilot.press("ctrl+c")
        await wait_for(pilot, lambda: app._exit)


async def test_ctrl_c_with_a_selection_in_the_prompt_copies_it(make_app) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        prompt = app.screen.query_one(PromptInput)
        prompt.load_text("copy me")
        prompt.select_all()
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert app.clipboard == "copy me"
        assert not app._exit and app._quit_armed_at is None
