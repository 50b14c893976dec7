"""A chat whose stored settings have wrong types or ranges (stored before import checked them,
or by another program) opens and answers with the defaults in their place (issue 25: it
crashed the app with a TypeError on the first message)."""

from __future__ import annotations

import json
import sqlite3

import pytest

from ember.paths import get_paths

from .conftest import SIZE, send, wait_for, wait_idle

pytestmark = pytest.mark.anyio

BAD_SETTINGS = {
    "temperature": "hot",
    "top_k": [1],
    "top_p": 7.0,
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
