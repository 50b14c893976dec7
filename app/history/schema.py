"""The history's schema: append-only migrations, applied in order and recorded in the file."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

from ember.app.errors import HistoryError


def _m001_initial(db: sqlite3.Connection) -> None:
    _statements(
        db,
        """
        CREATE TABLE presets (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            content TEXT NOT NULL
        );
        CREATE TABLE conversations (
            id INTEGER PRIMARY KEY,
            title TEXT NOT NULL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            leaf_id INTEGER,
            system_prompt TEXT NOT NULL DEFAULT '',
            preset_id INTEGER REFERENCES presets(id) ON DELETE SET NULL,
            settings_json TEXT NOT NULL DEFAULT '{}'
        );
        CREATE TABLE messages (
            id INTEGER PRIMARY KEY,
            conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            parent_id INTEGER REFERENCES messages(id) ON DELETE CASCADE,
            role TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
            content TEXT NOT NULL,
            status TEXT NOT NULL DEFAULT 'complete',
            created_at REAL NOT NULL,
            stats_json TEXT NOT NULL DEFAULT '{}'
        );
        CREATE INDEX messages_by_parent ON messages(conversation_id, parent_id);
        """,
    )


def _statements(db: sqlite3.Connection, script: str) -> None:
    # One execute per statement: executescript() would COMMIT the migration's transaction early.
    for statement in script.split(";"):
        if statement.strip():
            db.execute(statement)


def _m002_message_parts(db: sqlite3.Connection) -> None:
    # a reply's reasoning, tool calls and tool results (app/history/parts.py), as a JSON list
    db.execute("ALTER TABLE messages ADD COLUMN parts_json TEXT NOT NULL DEFAULT '[]'")


# Append-only: never edit or reorder an entry, add m003_... for a schema change.
MIGRATIONS: list[tuple[str, Callable[[sqlite3.Connection], None]]] = [
    ("m001_initial", _m001_initial),
    ("m002_message_parts", _m002_message_parts),
]


def migrate(db: sqlite3.Connection, path: Path) -> None:
    db.execute(
        "CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)"
    )
    done = {r[0] for r in db.execute("SELECT name FROM migrations").fetchall()}
    known = {name for name, _ in MIGRATIONS}
    if done - known:
        newer = ", ".join(sorted(done - known))
        raise HistoryError(f"{path}: made by a newer Ember (migrations {newer}); upgrade Ember")
    for name, apply in MIGRATIONS:
        if name in done:
            continue
        db.execute("BEGIN IMMEDIATE")
        try:
            apply(db)
            db.execute(
                "INSERT INTO migrations (name, applied_at) VALUES (?, ?)", (name, time.time())
            )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
