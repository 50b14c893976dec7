"""An empty reply is never shown as a finished answer: the chat says what happened (the model
ended without text) and offers Ctrl+R, which tries again."""

from __future__ import annotations

import pytest

from ember.tui.widgets.message_view import MessageView

from .conftest import SIZE, screen_text, send, wait_for, wait_idle

pytestmark = pytest.mark.anyio


async def test_an_empty_reply_says_what_happened_and_ctrl_r_retries(
    make_app, history, backends
) -> None:
    backends.script.replies = ["", "Here it is."]
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "rewrite this function")
        await wait_idle(pilot)
        conv = app.session.conversation
        assert conv is not None
        reply = history.path(conv.id)[-1]
        assert (reply.role, reply.status, reply.content) == ("assistant", "empty", "")
        await wait_for(pilot, lambda: "Ctrl+R tries again" in screen_text(app))
        notes = [str(n.message) for n in app._notifications]
        assert any(n.startswith("Empty reply: the model ended its reply at once") for n in notes)
        assert any("Ctrl+R to try again" in n for n in notes)
        await pilot.press("ctrl+r")
        await wait_idle(pilot)
        retry = history.path(conv.id)[-1]
        assert (retry.status, retry.content) == ("complete", "Here it is.")
        boxes = app.screen.query_one(MessageView).boxes()
        assert boxes[-1].text == "Here it is." and boxes[-1].status == "complete"


async def test_an_empty_reply_is_not_replayed_to_the_model(make_app, history, backends) -> None:
    backends.script.replies = ["", "second"]
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "one")
        await wait_idle(pilot)
        await send(pilot, "two")
        await wait_idle(pilot)
    request = backends.last.requests[-1]
    roles = [m.role for m in request.messages]
    assert roles == ["user", "user"]  # the empty turn is left out, like a failed one
