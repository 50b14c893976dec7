"""History: migrations, branches, presets, search, locking, corruption and SIGKILL safety."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ember.app.errors import HistoryError
from ember.app.history.store import MIGRATIONS, History

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def history(tmp_path: Path):
    h = History.open(tmp_path / "history.sqlite3")
    yield h
    h.close()


def test_wal_and_migrations_recorded(history: History, tmp_path: Path) -> None:
    assert history.applied_migrations() == [name for name, _ in MIGRATIONS]
    assert all(name.startswith("m001_") for name in history.applied_migrations()[:1])
    mode = history._db.execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_reopen_does_not_reapply_migrations(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite3"
    h = History.open(path)
    conv = h.create_conversation("kept")
    h.close()
    h = History.open(path)
    assert h.applied_migrations() == [name for name, _ in MIGRATIONS]
    assert [c.title for c in h.list_conversations()] == ["kept"]
    assert h.conversation(conv.id).title == "kept"
    h.close()


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite3"
    History.open(path).close()
    db = sqlite3.connect(path)
    db.execute("INSERT INTO migrations VALUES ('m999_future', 0)")
    db.commit()
    db.close()
    with pytest.raises(HistoryError, match="newer Ember"):
        History.open(path)


def test_path_branches_and_siblings(history: History) -> None:
    conv = history.create_conversation()
    u1 = history.add_message(conv.id, "user", "hi", None)
    a1 = history.add_message(conv.id, "assistant", "hello", u1.id)
    u2 = history.add_message(conv.id, "user", "tell a joke", a1.id)
    a2 = history.add_message(conv.id, "assistant", "joke 1", u2.id)
    assert [m.content for m in history.path(conv.id)] == ["hi", "hello", "tell a joke", "joke 1"]

    # edit the second user message: a sibling branch under the same parent
    u2b = history.add_message(conv.id, "user", "tell a poem", a1.id)
    history.add_message(conv.id, "assistant", "poem", u2b.id)
    assert [m.content for m in history.path(conv.id)] == ["hi", "hello", "tell a poem", "poem"]
    assert [m.id for m in history.siblings(u2b.id)] == [u2.id, u2b.id]

    # the old branch stays reachable
    history.select_branch(u2.id)
    assert [m.id for m in history.path(conv.id)] == [u1.id, a1.id, u2.id, a2.id]


def test_regenerate_adds_assistant_sibling(history: History) -> None:
    conv = history.create_conversation()
    u = history.add_message(conv.id, "user", "q", None)
    a = history.add_message(conv.id, "assistant", "first", u.id)
    b = history.add_message(conv.id, "assistant", "second", u.id)
    assert [m.id for m in history.siblings(a.id)] == [a.id, b.id]
    assert history.path(conv.id)[-1].content == "second"


def test_edit_first_message_makes_root_sibling(history: History) -> None:
    conv = history.create_conversation()
    first = history.add_message(conv.id, "user", "one", None)
    second = history.add_message(conv.id, "user", "two", None)
    assert [m.id for m in history.siblings(second.id)] == [first.id, second.id]
    assert [m.content for m in history.path(conv.id)] == ["two"]


def test_search_rename_delete(history: History) -> None:
    a = history.create_conversation("Python tips")
    b = history.create_conversation("Cooking")
    history.add_message(b.id, "user", "how long to boil 100% eggs", None)
    assert [c.id for c in history.list_conversations("python")] == [a.id]
    assert [c.id for c in history.list_conversations("eggs")] == [b.id]
    assert [c.id for c in history.list_conversations("100%")] == [b.id]
    assert history.list_conversations("_") == []
    history.update_conversation(a.id, title="Renamed", settings={"temperature": 0.1})
    assert history.conversation(a.id).title == "Renamed"
    assert history.conversation(a.id).settings == {"temperature": 0.1}
    history.delete_conversation(b.id)
    assert [c.id for c in history.list_conversations()] == [a.id]
    with pytest.raises(HistoryError):
        history.conversation(b.id)


def test_presets(history: History) -> None:
    p = history.save_preset("Pirate", "Talk like a pirate.")
    history.save_preset("Terse", "Answer briefly.")
    with pytest.raises(HistoryError, match="already exists"):
        history.save_preset("Pirate", "dup")
    history.save_preset("Pirate!", "Arr.", preset_id=p.id)
    assert [(x.name, x.content) for x in history.list_presets()] == [
        ("Pirate!", "Arr."),
        ("Terse", "Answer briefly."),
    ]
    conv = history.create_conversation()
    history.update_conversation(conv.id, preset_id=p.id, system_prompt="Arr.")
    history.delete_preset(p.id)
    assert history.conversation(conv.id).preset_id is None
    assert history.conversation(conv.id).system_prompt == "Arr."


def test_streaming_reply_marked_interrupted_on_reopen(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite3"
    h = History.open(path)
    conv = h.create_conversation()
    u = h.add_message(conv.id, "user", "q", None)
    r = h.add_message(conv.id, "assistant", "", u.id, status="streaming")
    h.update_message(r.id, "partial")
    h.close()
    h = History.open(path)
    assert h.message(r.id).status == "interrupted"
    assert h.message(r.id).content == "partial"
    h.close()


def test_second_instance_is_told_history_in_use(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite3"
    h = History.open(path)
    with pytest.raises(HistoryError, match="in use by another Ember"):
        History.open(path)
    h.close()
    History.open(path).close()  # free again after close


def test_second_process_is_told_history_in_use(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite3"
    h = History.open(path)
    code = f"from ember.app.history.store import History; History.open(__import__('pathlib').Path({str(path)!r}))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode != 0
    assert "in use by another Ember" in proc.stderr
    h.close()


def test_corrupt_database_moved_aside(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite3"
    garbage = b"this is not sqlite at all" * 100
    path.write_bytes(garbage)
    h = History.open(path)
    assert "moved it to" in h.notice
    aside = [
        p
        for p in tmp_path.iterdir()
        if ".corrupt-" in p.name and not p.name.endswith(("-wal", "-shm"))
    ]
    assert len(aside) == 1
    assert aside[0].read_bytes() == garbage  # never overwritten
    assert h.list_conversations() == []
    h.close()


_WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from ember.app.history.store import History
    h = History.open(Path(sys.argv[1]))
    conv = h.create_conversation("crash")
    for turn in range(3):
        parent = h.path(conv.id)[-1].id if h.path(conv.id) else None
        u = h.add_message(conv.id, "user", f"question {turn}", parent)
        r = h.add_message(conv.id, "assistant", "", u.id, status="streaming")
        text = ""
        for i in range(200):
            text += f"tok{i} "
            h.update_message(r.id, text)
        h.update_message(r.id, text, status="complete")
        print(f"ack {u.id} {r.id}", flush=True)
    u = h.add_message(conv.id, "user", "last question", r.id)
    r = h.add_message(conv.id, "assistant", "", u.id, status="streaming")
    print(f"ack {u.id} {r.id}", flush=True)
    text = ""
    i = 0
    while True:  # stream forever until killed
        text += f"t{i} "
        h.update_message(r.id, text)
        i += 1
    """
)


def test_sigkill_while_streaming_keeps_acknowledged_messages(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite3"
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path)], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    acks = []
    for line in proc.stdout:
        acks.append(tuple(int(x) for x in line.split()[1:]))
        if len(acks) == 4:
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    h = History.open(path)  # the lock died with the process
    assert h.integrity_check() == "ok"
    for user_id, reply_id in acks[:3]:
        assert h.message(user_id).content.startswith("question")
        assert h.message(reply_id).status == "complete"
    user_id, reply_id = acks[3]
    assert h.message(user_id).content == "last question"
    assert h.message(reply_id).status == "interrupted"
    h.close()
