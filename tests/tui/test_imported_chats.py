"""A chat whose stored settings have wrong types or ranges (stored before import checked them,
or by another program) opens and answers with the defaults in their place (issue 25: it
crashed the app with a TypeError on the first message)."""

from __future__ import annotations

import json
import sqlite3

import pytest

from ember.paths import get_paths

from .conftest import SIZE, screen_text, send, wait_for, wait_idle

pytestmark = pytest.mark.anyio

BAD_SETTINGS = {
    "temperature": "hot",
    "top_k": [1],
    "top_p": "0.9",
    "max_tokens": None,
    "seed": "x",
    "model": 3,
    "thinking": "yes",
    "allowed_tools": ["add"],
}


async def test_a_chat_with_wrong_typed_settings_still_answers(make_app, history, backends):
    conv = history.create_conversation("imported long ago", "", {"temperature": 0.5})
    raw = sqlite3.connect(get_paths().history_db)
    with raw:
        raw.execute(
            "UPDATE conversations SET settings_json=? WHERE id=?",
            (json.dumps(BAD_SETTINGS), conv.id),
        )
    raw.close()
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.session.conversation is not None)
        assert app.session.conversation.id == conv.id
        await send(pilot, "hello?")
        await wait_idle(pilot)
        reply = app.session.path()[-1]
        assert (reply.role, reply.status) == ("assistant", "complete")
        sampling = backends.last.requests[-1].sampling
        assert sampling.temperature == app.settings.temperature  # the default, not "hot"


async def test_a_reply_with_stats_stored_badly_still_shows(make_app, history, backends):
    """Stats of the wrong type (stored before import checked them) are left out of the status
    bar; it used to format "x" as a number when the chat opened."""
    conv = history.create_conversation("stats from elsewhere", "", {})
    user = history.add_message(conv.id, "user", "hi", None)
    reply = history.add_message(conv.id, "assistant", "hello", user.id)
    bad = {"ttft_s": "x", "decode_tok_s": [1], "context_tokens": 12, "context_limit": 4096}
    raw = sqlite3.connect(get_paths().history_db)
    with raw:
        raw.execute("UPDATE messages SET stats_json=? WHERE id=?", (json.dumps(bad), reply.id))
    raw.close()
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: "ctx 12/4096" in screen_text(app))
        assert "TTFT 0 ms" in screen_text(app)  # the bad value left out: the default
