"""Opening the history's SQLite file without ever losing it.

A file SQLite calls corrupt (SQLITE_CORRUPT, SQLITE_NOTADB, a failed quick_check) is moved
aside, never overwritten. Anything else is not corruption and the file is left alone: a file
another program holds locked is waited for, then refused naming that program; a file or folder
Ember may not write is copied into memory and opened from there (`ReadOnly`); other errors are
one line. Text columns are decoded with surrogateescape so a row with invalid UTF-8 can be read
and marked damaged (records.py) instead of failing the whole query.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ember.app.errors import HistoryError
from ember.app.history.holders import describe_holders
from ember.app.history.lock import HistoryLock

DEFAULT_WAIT_S = 5.0  # how long to wait for another program's lock before giving up


class ReadOnly(Exception):
    """The history cannot be written here; str() says why."""


def failure_kind(exc: sqlite3.Error) -> str:
    """corrupt | busy | read-only | full | other, from SQLite's error code."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    for prefix, kind in (
        ("SQLITE_CORRUPT", "corrupt"),
        ("SQLITE_NOTADB", "corrupt"),
        ("SQLITE_BUSY", "busy"),
        ("SQLITE_LOCKED", "busy"),
        ("SQLITE_READONLY", "read-only"),
        ("SQLITE_CANTOPEN", "read-only"),
        ("SQLITE_PERM", "read-only"),
        ("SQLITE_FULL", "full"),
    ):
        if name.startswith(prefix):
            return kind
    return "other"


def locked_message(path: Path, wait_s: float) -> str:
    return (
        f"history database {path} is locked by {describe_holders(path)} (waited {wait_s:g} s); "
        "close that program and try again"
    )


def read_only_reason(path: Path) -> str:
    """Why Ember may not write the history at path ("" when it may)."""
    if path.exists():
        return "" if os.access(path, os.W_OK) else f"{path} is read-only"
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return "" if os.access(folder, os.W_OK) else f"{folder} is read-only"


def _configure(db: sqlite3.Connection, wait_s: float) -> sqlite3.Connection:
    db.isolation_level = "DEFERRED"  # `with db:` wraps each write in one transaction
    db.row_factory = sqlite3.Row
    db.text_factory = lambda data: data.decode("utf-8", "surrogateescape")
    db.execute(f"PRAGMA busy_timeout={int(wait_s * 1000)}")
    db.execute("PRAGMA foreign_keys=ON")
    return db


def connect(path: Path, wait_s: float = DEFAULT_WAIT_S) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=wait_s)
    _configure(db, wait_s)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")  # a commit the user saw survives a crash or power loss
    return db


def connect_checked(path: Path, wait_s: float = DEFAULT_WAIT_S) -> tuple[sqlite3.Connection, str]:
    """Open path; move a corrupt file (and its WAL) aside and start fresh; ReadOnly or
    HistoryError for everything that is not corruption."""
    if not path.exists():
        return connect(path, wait_s), ""
    try:
        db = connect(path, wait_s)
        result = str(db.execute("PRAGMA quick_check").fetchone()[0])
        if result == "ok":
            return db, ""
        db.close()
        reason = result.splitlines()[0]
    except sqlite3.DatabaseError as exc:
        kind = failure_kind(exc)
        if kind == "busy":
            raise HistoryError(locked_message(path, wait_s)) from None
        if kind == "read-only":
            raise ReadOnly(f"{path} cannot be written ({exc})") from None
        if kind != "corrupt":
            raise HistoryError(f"history database {path}: {exc}") from None
        reason = str(exc)
    aside = path.with_name(f"{path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
    for suffix in ("", "-wal", "-shm"):
        part = Path(str(path) + suffix)
        if part.exists():
            os.replace(part, Path(str(aside) + suffix))
    notice = f"history database {path} was unreadable ({reason}); moved it to {aside} and started a new one"
    return connect(path, wait_s), notice


def read_only_copy(path: Path, wait_s: float = DEFAULT_WAIT_S) -> sqlite3.Connection:
    """An in-memory copy of the history at path (empty if there is none), for a history Ember
    may not write: everything reads as usual, and nothing written reaches the disk."""
    memory = _configure(
        sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False), wait_s
    )
    if not path.exists():
        return memory
    last: sqlite3.Error | None = None
    for params in ("mode=ro", "mode=ro&immutable=1"):  # immutable: no -shm can be made here
        try:
            source = sqlite3.connect(
                f"{path.resolve().as_uri()}?{params}", uri=True, timeout=wait_s
            )
        except sqlite3.Error as exc:
            last = exc
            continue
        try:
            result = str(source.execute("PRAGMA quick_check").fetchone()[0])
            if result != "ok":
                raise HistoryError(
                    f"history database {path} is unreadable ({result.splitlines()[0]}) and "
                    "read-only, so it cannot be moved aside"
                )
            source.backup(memory)
            return memory
        except sqlite3.Error as exc:
            last = exc
        finally:
            source.close()
    if last is not None and failure_kind(last) == "busy":
        raise HistoryError(locked_message(path, wait_s))
    raise HistoryError(f"history database {path} cannot be read: {last}")


@dataclass
class Opened:
    """An open history database: the connection, its lock (None for an in-memory copy), a
    notice for the user, and why it is read-only ("" when it is not)."""

    db: sqlite3.Connection
    lock: HistoryLock | None
    notice: str = ""
    read_only: str = ""


def open_database(
    path: Path, wait_s: float, prepare: Callable[[sqlite3.Connection, Path], None]
) -> Opened:
    """Lock and open the history at path, then prepare (migrate) it; an in-memory copy when
    Ember may not write there."""
    reason = read_only_reason(path)
    lock = None
    if not reason:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            lock = HistoryLock.acquire(path.with_name(path.name + ".lock"))
        except OSError as exc:  # a read-only disk, no permission for the lock file
            reason = f"cannot write in {path.parent} ({exc.strerror or exc})"
    if lock is None:
        return _read_only(path, reason, wait_s, prepare)
    try:
        db, notice = connect_checked(path, wait_s)
        prepare(db, path)
    except ReadOnly as exc:
        lock.release()
        return _read_only(path, str(exc), wait_s, prepare)
    except sqlite3.Error as exc:
        lock.release()
        if failure_kind(exc) == "read-only":
            return _read_only(path, str(exc), wait_s, prepare)
        raise HistoryError(failure_message(f"history {path}", exc, path, wait_s)) from None
    except BaseException:
        lock.release()
        raise
    return Opened(db, lock, notice)


def _read_only(
    path: Path, reason: str, wait_s: float, prepare: Callable[[sqlite3.Connection, Path], None]
) -> Opened:
    db = read_only_copy(path, wait_s)
    prepare(db, path)
    notice = (
        f"the history is read-only ({reason}): your chats are shown, but new messages "
        "are kept only until Ember exits"
    )
    return Opened(db, None, notice, reason)


def failure_message(
    what: str, exc: sqlite3.Error, path: Path | None, wait_s: float, verb: str = "saved"
) -> str:
    """One line for a failed read or write of the history."""
    kind = failure_kind(exc)
    where = path or "the history"
    if kind == "full":
        return f"{what} was not {verb}: the disk holding {where} is full; free some space"
    if kind == "busy" and path is not None:
        return f"{what} was not {verb}: {locked_message(path, wait_s)}"
    if kind == "read-only":
        return f"{what} was not {verb}: {where} became read-only ({exc})"
    return f"{what} was not {verb}: {where}: {exc}"
