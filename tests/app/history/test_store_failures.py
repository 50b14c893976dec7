"""The history never loses a chat: locked, read-only, damaged, looping and full databases."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ember.app.errors import HistoryError
from ember.app.history.store import History
from tests.app.history.read_only import read_only

_HOLDER = textwrap.dedent(
    """
    import sqlite3, sys
    db = sqlite3.connect(sys.argv[1], isolation_level=None)
    db.execute("BEGIN EXCLUSIVE")
    print("locked", flush=True)
    sys.stdin.readline()  # hold the lock until told to let go
    db.execute("COMMIT")
    print("released", flush=True)
    """
)


def _seeded(path: Path) -> tuple[int, list[int]]:
    """A history with one chat of three messages; returns (conversation id, message ids)."""
    h = History.open(path)
    conv = h.create_conversation("kept chat")
    ids: list[int] = []
    for role, text in (("user", "hello"), ("assistant", "hi there"), ("user", "more")):
        ids.append(h.add_message(conv.id, role, text, ids[-1] if ids else None).id)
    h.close()
    return conv.id, ids


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    """Another program (python with sqlite3) holding an exclusive lock on a seeded history."""
    path = tmp_path / "h.sqlite3"
    _seeded(path)
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    try:
        yield proc, path
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)


def test_locked_is_not_corrupt_it_names_the_holder(
    holder: tuple[subprocess.Popen[str], Path],
) -> None:
    proc, path = holder
    before = path.read_bytes()
    with pytest.raises(HistoryError, match=rf"is locked by \S+ \(pid {proc.pid}\)") as caught:
        History.open(path, wait_s=0.3)
    assert "waited 0.3 s" in str(caught.value)
    assert path.read_bytes() == before  # not moved aside, not touched
    assert not list(path.parent.glob("*.corrupt-*"))


def test_open_waits_for_a_lock_that_is_let_go(holder: tuple[subprocess.Popen[str], Path]) -> None:
    proc, path = holder
    opened: list[History] = []
    worker = threading.Thread(target=lambda: opened.append(History.open(path, wait_s=30)))
    worker.start()
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()
    assert proc.stdout.readline().strip() == "released"
    worker.join(timeout=60)
    assert opened and [c.title for c in opened[0].list_conversations()] == ["kept chat"]
    opened[0].close()


def test_a_lock_taken_during_the_session_fails_that_write_in_one_line(
    tmp_path: Path,
) -> None:
    path = tmp_path / "h.sqlite3"
    conv_id, ids = _seeded(path)
    h = History.open(path, wait_s=0.2)
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        with pytest.raises(HistoryError, match=rf"was not saved: .*locked by \S+ \(pid {proc.pid}"):
            h.add_message(conv_id, "user", "typed while locked", ids[-1])
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert h.add_message(conv_id, "user", "typed again", ids[-1]).content == "typed again"
    h.close()


def test_read_only_file_opens_read_only_with_a_notice(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite3"
    conv_id, _ = _seeded(path)
    before = path.read_bytes()
    with read_only(path, tmp_path):
        h = History.open(path)
        assert h.read_only and "read-only" in h.notice and "until Ember exits" in h.notice
        assert [m.content for m in h.path(conv_id)] == ["hello", "hi there", "more"]
        h.add_message(conv_id, "user", "kept in memory", h.path(conv_id)[-1].id)
        assert h.path(conv_id)[-1].content == "kept in memory"
        h.close()
    assert path.read_bytes() == before


def test_read_only_folder_without_a_history_opens_empty(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    with read_only(folder):
        h = History.open(folder / "h.sqlite3")
        assert h.read_only and h.list_conversations() == []
        h.create_conversation("in memory")
        h.close()
    assert list(folder.iterdir()) == []


def test_damaged_rows_are_read_as_damaged(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite3"
    conv_id, ids = _seeded(path)
    raw = sqlite3.connect(path)
    with raw:
        raw.execute("UPDATE messages SET content=CAST(X'636166e921' AS TEXT) WHERE id=?", (ids[1],))
        raw.execute("UPDATE messages SET stats_json='{broken' WHERE id=?", (ids[2],))
        raw.execute("UPDATE conversations SET settings_json='[1]', created_at='x', "
                    "title=CAST(X'ff' AS TEXT)")  # fmt: skip
    raw.close()
    h = History.open(path)
    (conv,) = h.list_conversations()
    assert conv.title == "\ufffd" and conv.settings == {}
    assert (
        conv.damaged
        == "title: invalid UTF-8, created_at: not a number, settings_json: not a JSON object"
    )
    first, second, third = h.path(conv_id)
    assert first.damaged == "" and first.content == "hello"
    assert second.content == "caf\ufffd!" and second.damaged == "content: invalid UTF-8"
    assert third.stats == {} and third.damaged == "stats_json: not a JSON object"
    h.update_message(second.id, second.content)  # writing back what was read works
    h.close()


def test_a_parent_loop_ends_the_branch_instead_of_hanging(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite3"
    conv_id, ids = _seeded(path)
    raw = sqlite3.connect(path)
    with raw:
        raw.execute("UPDATE messages SET parent_id=? WHERE id=?", (ids[2], ids[0]))
    raw.close()
    h = History.open(path)
    result: list[list[str]] = []
    worker = threading.Thread(target=lambda: result.append([m.damaged for m in h.path(conv_id)]))
    worker.start()
    worker.join(timeout=30)
    assert result, "path() hung on a parent_id loop"
    assert result[0][0] == "parent_id: a loop" and len(result[0]) == 3
    done = threading.Event()

    def select() -> None:
        h.select_branch(ids[0])
        done.set()

    threading.Thread(target=select, daemon=True).start()
    assert done.wait(timeout=30), "select_branch() hung on a parent_id loop"
    h.close()


def test_a_full_disk_fails_the_write_in_one_line_and_keeps_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite3"
    conv_id, ids = _seeded(path)
    h = History.open(path)
    pages = h._db.execute("PRAGMA page_count").fetchone()[0]
    h._db.execute(f"PRAGMA max_page_count={pages}")  # SQLite answers SQLITE_FULL past this
    with pytest.raises(HistoryError, match=r"the user message was not saved: .* is full"):
        h.add_message(conv_id, "user", "x" * 100_000, ids[-1])
    assert [m.content for m in h.path(conv_id)] == ["hello", "hi there", "more"]
    h.close()
    assert History.open(path).integrity_check() == "ok"


def test_text_with_lone_surrogates_is_stored_as_replacement_characters(tmp_path: Path) -> None:
    h = History.open(tmp_path / "h.sqlite3")
    conv = h.create_conversation("caf\udce9")
    message = h.add_message(conv.id, "user", "\ud800 typed", None)
    assert h.conversation(conv.id).title == "caf\ufffd" and message.content == "\ufffd typed"
    h.close()
