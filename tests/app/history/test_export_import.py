"""Export (Markdown, JSON with branches) and import (checked first, all or nothing) of chats,
through the History API and `ember history` on a real SQLite file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ember.app.cli import main
from ember.app.errors import HistoryError
from ember.app.history.export import export_json, export_markdown
from ember.app.history.importer import import_chats, parse_export, read_export_file
from ember.app.history.parts import MessagePart
from ember.app.history.store import History
from ember.paths import get_paths


@pytest.fixture
def history(ember_home: Path):
    h = History.open(get_paths().history_db)
    yield h
    h.close()


def _branched_chat(history: History) -> int:
    """A chat with two replies to one question (the second shown) and a tool-using reply."""
    conv = history.create_conversation("Capitals", "Be brief.", {"model": "m", "temperature": 0.2})
    user = history.add_message(conv.id, "user", "What is the capital of France?", None)
    history.add_message(conv.id, "assistant", "Lyon?", user.id, status="stopped")
    parts = (
        MessagePart("reasoning", "The user wants a capital.\n```not a fence end"),
        MessagePart("tool_call", name="lookup", arguments='{"country": "France"}', call_id="c1"),
        MessagePart("tool_result", "Paris", name="lookup", call_id="c1", status="ok"),
        MessagePart("text", "Paris."),
    )
    history.add_message(conv.id, "assistant", "Paris.", user.id, parts=parts)
    history.update_message(history.path(conv.id)[-1].id, "Paris.", stats={"generated_tokens": 2})
    return conv.id


def test_json_round_trip_keeps_every_branch_and_the_shown_one(history: History) -> None:
    conv_id = _branched_chat(history)
    before = history.conversation(conv_id)
    text = export_json(history, [before])
    (imported,) = import_chats(history, parse_export(text))
    assert imported.id != conv_id
    assert (imported.title, imported.system_prompt) == (before.title, before.system_prompt)
    assert imported.settings == before.settings
    assert imported.created_at == before.created_at
    old, new = history.tree(conv_id), history.tree(imported.id)
    assert [(m.role, m.content, m.status, m.parts, m.stats) for m in new] == [
        (m.role, m.content, m.status, m.parts, m.stats) for m in old
    ]
    # the tree's shape: both replies hang under the question, and the second one is shown
    assert new[1].parent_id == new[2].parent_id == new[0].id
    assert [m.content for m in history.path(imported.id)] == [
        "What is the capital of France?",
        "Paris.",
    ]


def test_markdown_shows_the_branch_with_thinking_and_tools_apart(history: History) -> None:
    conv_id = _branched_chat(history)
    text = export_markdown(history, [history.conversation(conv_id)])
    assert text.startswith("# Capitals\n")
    assert "## System\n\nBe brief." in text
    assert "## You\n\nWhat is the capital of France?" in text
    assert "Lyon?" not in text  # another branch: only JSON has it
    assert "> **Thinking**\n>\n> The user wants a capital.\n> ```not a fence end" in text
    assert '**Tool call** `lookup`\n\n```json\n{"country": "France"}\n```' in text
    assert "**Tool result** `lookup` (ok)\n\n```\nParis\n```" in text
    assert text.rstrip().endswith("Paris.")


def test_a_tool_result_with_backticks_keeps_its_fence(history: History) -> None:
    conv = history.create_conversation("t")
    user = history.add_message(conv.id, "user", "q", None)
    part = MessagePart("tool_result", "a ``` b ```` c", name="x", call_id="1", status="ok")
    history.add_message(conv.id, "assistant", "", user.id, parts=(part,))
    text = export_markdown(history, [history.conversation(conv.id)])
    assert "`````\na ``` b ```` c\n`````" in text


def test_a_history_from_before_parts_is_migrated_in_place(tmp_path: Path) -> None:
    import sqlite3

    from ember.app.history.store import MIGRATIONS

    path = tmp_path / "old.sqlite3"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
    MIGRATIONS[0][1](db)
    db.execute("INSERT INTO migrations VALUES ('m001_initial', 0)")
    db.execute("INSERT INTO conversations (title, created_at, updated_at) VALUES ('old', 0, 0)")
    db.execute(
        "INSERT INTO messages (conversation_id, role, content, created_at) VALUES (1, 'user', 'hi', 0)"
    )
    db.commit()
    db.close()
    history = History.open(path)
    try:
        (message,) = history.tree(1)
        assert (message.content, message.parts) == ("hi", ())
        assert "m002_message_parts" in history.applied_migrations()
    finally:
        history.close()


def _export_body(history: History) -> dict:
    return json.loads(export_json(history, history.list_conversations()))


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda b: b.update(format="other"), "format: must be 'ember-chats'"),
        (lambda b: b.update(version=2), "version: 2 is not 1"),
        (lambda b: b["conversations"][0].update(title=3), "conversations[0].title: must be text"),
        (
            lambda b: b["conversations"][0]["messages"][0].update(role="system"),
            "conversations[0].messages[0].role: 'system'",
        ),
        (
            lambda b: b["conversations"][0]["messages"][0].update(parent=99),
            "conversations[0].messages[0].parent: 99 is not the id of an earlier message",
        ),
        (
            lambda b: b["conversations"][0]["messages"][1].update(
                id=b["conversations"][0]["messages"][0]["id"]
            ),
            "conversations[0].messages[1].id",
        ),
        (lambda b: b["conversations"][0].update(leaf=12345), "conversations[0].leaf: 12345"),
        (
            lambda b: b["conversations"][0]["messages"][2]["parts"][1].update(arguments="[1]"),
            "conversations[0].messages[2].parts[1]: tool_call lookup arguments: not a JSON object",
        ),
        (
            lambda b: b["conversations"][0]["messages"][0].update(created_at=-1),
            "conversations[0].messages[0].created_at",
        ),
        (
            lambda b: b["conversations"][0]["messages"][0].update(content="\ud800"),
            "conversations[0].messages[0].content: not valid Unicode",
        ),
    ],
)
def test_a_bad_file_names_the_field_and_writes_nothing(history: History, change, reason) -> None:
    _branched_chat(history)
    body = _export_body(history)
    change(body)
    with pytest.raises(HistoryError, match=None) as info:
        parse_export(json.dumps(body))
    assert reason in str(info.value)
    assert len(history.list_conversations()) == 1


def test_a_later_chat_that_fails_leaves_the_earlier_ones_whole(history: History) -> None:
    """Import checks every chat before writing any, so one bad chat imports nothing."""
    _branched_chat(history)
    body = _export_body(history)
    bad = json.loads(json.dumps(body["conversations"][0]))
    bad["messages"][0]["status"] = "exploded"
    body["conversations"].append(bad)
    with pytest.raises(HistoryError, match=r"conversations\[1\]\.messages\[0\]\.status"):
        parse_export(json.dumps(body))
    assert len(history.list_conversations()) == 1
    assert history.integrity_check() == "ok"


def test_files_that_are_not_exports(tmp_path: Path) -> None:
    for name, data, reason in [
        ("a.json", b"{not json", "not JSON"),
        ("b.json", b"\xff\xfe\x00", "not UTF-8"),
        ("c.json", b"[]", "the file: must be an object"),
    ]:
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(HistoryError, match=reason) as info:
            read_export_file(path)
        assert str(path) in str(info.value)
    with pytest.raises(HistoryError, match="cannot read"):
        read_export_file(tmp_path / "missing.json")


def test_cli_export_and_import(ember_home: Path, tmp_path: Path, capsys) -> None:
    history = History.open(get_paths().history_db)
    conv_id = _branched_chat(history)
    history.close()
    out = tmp_path / "chats.json"
    assert main(["history", "export", "-o", str(out)]) == 0
    assert main(["history", "export", "Capitals", "--format", "md"]) == 0
    printed = capsys.readouterr().out
    assert "exported 1 chat to" in printed and "# Capitals" in printed
    assert main(["history", "import", str(out)]) == 0
    assert "imported 1 chat (3 messages)" in capsys.readouterr().out
    assert main(["history", "list"]) == 0
    listing = capsys.readouterr().out
    assert listing.count("Capitals") == 2
    assert main(["history", "export", "nope"]) == 1
    assert "no chat with the id or title 'nope'" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "ember-chats", "version": 1, "conversations": [{}]}')
    assert main(["history", "import", str(bad)]) == 1
    assert "conversations[0].messages: must be a list" in capsys.readouterr().err
    reopened = History.open(get_paths().history_db)
    try:
        assert len(reopened.list_conversations()) == 2
        assert reopened.conversation(conv_id).title == "Capitals"
    finally:
        reopened.close()
