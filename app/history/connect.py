"""Opening the history's SQLite file: WAL, durable commits, and a corrupt file moved aside."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path


def connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.isolation_level = "DEFERRED"  # `with db:` wraps each write in one transaction
    db.row_factory = sqlite3.Row
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")  # a commit the user saw survives a crash or power loss
    db.execute("PRAGMA foreign_keys=ON")
    db.execute("PRAGMA busy_timeout=2000")
    return db


def connect_checked(path: Path) -> tuple[sqlite3.Connection, str]:
    """Open path; if SQLite finds it corrupt, move it (and its WAL) aside and start fresh."""
    reason = ""
    if path.exists():
        try:
            db = connect(path)
            result = str(db.execute("PRAGMA quick_check").fetchone()[0])
            if result == "ok":
                return db, ""
            db.close()
            reason = result.splitlines()[0]
        except sqlite3.DatabaseError as exc:
            reason = str(exc)
        aside = path.with_name(
            f"{path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
        )
        for suffix in ("", "-wal", "-shm"):
            part = Path(str(path) + suffix)
            if part.exists():
                os.replace(part, Path(str(aside) + suffix))
        notice = f"history database {path} was unreadable ({reason}); moved it to {aside} and started a new one"
        return connect(path), notice
    return connect(path), ""
