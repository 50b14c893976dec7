"""Property tests (hypothesis) of history import: whatever a file holds, import either refuses
it in one line (HistoryError, nothing written) or stores chats that read back as written and
that `ember history list` can show. Never another exception."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ember.app.errors import HistoryError
from ember.app.history.chat_settings import SETTINGS
from ember.app.history.importer import import_chats, parse_export
from ember.app.history.store import History
from tests.fuzz import FUZZ, nasty_text

numbers = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, 1.7e9, 1e300, -1.0, 253_402_300_799, 253_402_300_800]),
)
scalars = st.one_of(st.none(), st.booleans(), numbers, nasty_text)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(nasty_text, inner, max_size=3)
    ),
    max_leaves=12,
)


def _deep(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


settings_values = st.dictionaries(
    st.one_of(st.sampled_from([*SETTINGS, "allowed_tools"]), nasty_text),
    st.one_of(json_values, st.builds(_deep, st.integers(0, 60))),
    max_size=5,
)
messages = st.lists(
    st.fixed_dictionaries(
        {"id": st.integers(1, 4), "role": st.sampled_from(["user", "assistant"])},
        optional={
            "parent": st.one_of(st.none(), st.integers(0, 4)),
            "content": st.one_of(nasty_text, json_values),
            "created_at": numbers,
            "stats": st.one_of(st.dictionaries(nasty_text, json_values, max_size=3), json_values),
            "status": st.sampled_from(["complete", "streaming", "exploded"]),
        },
    ),
    max_size=4,
)
chats = st.fixed_dictionaries(
    {"title": nasty_text, "messages": messages},
    optional={
        "created_at": numbers,
        "updated_at": numbers,
        "settings": st.one_of(settings_values, json_values),
        "system_prompt": st.one_of(nasty_text, json_values),
    },
)


@FUZZ
@given(body=st.lists(chats, min_size=1, max_size=2))
def test_import_refuses_in_one_line_or_stores_what_reads_back(tmp_path: Path, body) -> None:
    text = json.dumps({"format": "ember-chats", "version": 1, "conversations": body})
    history = History.open(tmp_path / f"h{time.monotonic_ns()}.sqlite3")
    try:
        try:
            checked = parse_export(text)
        except HistoryError as exc:
            assert "\n" not in str(exc)
            assert history.list_conversations() == []
            return
        stored = import_chats(history, checked)
        for chat, conv in zip(checked, stored, strict=True):
            back = history.conversation(conv.id)
            assert back.damaged == ""
            assert back.settings == chat.conversation.settings
            assert "allowed_tools" not in back.settings
            assert math.isfinite(back.updated_at) and time.localtime(back.updated_at)
            assert len(history.tree(conv.id)) == len(chat.messages)
    finally:
        history.close()
