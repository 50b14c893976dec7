"""Stored responses (store: true) in SQLite in Ember's data folder, for GET / DELETE
/v1/responses/{id} and previous_response_id.

Each row keeps the response object and the conversation's items up to it (earlier responses'
items, the input, the output), so a follow-up names one id and sends only its new input. Bounded:
at most MAX_RESPONSES rows and MAX_TOTAL_BYTES in all (the oldest go first), and one row at most
MAX_ENTRY_BYTES (a longer conversation is refused before it is generated).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

MAX_RESPONSES = 1000
MAX_ENTRY_BYTES = 8 << 20
MAX_TOTAL_BYTES = 256 << 20

SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    id TEXT PRIMARY KEY,
    created REAL NOT NULL,
    response TEXT NOT NULL,
    items TEXT NOT NULL,
    bytes INTEGER NOT NULL
)
"""


class ResponseStore:
    """id -> (response object, conversation items); opened on first use."""

    def __init__(
        self,
        path: Path,
        max_responses: int = MAX_RESPONSES,
        max_total_bytes: int = MAX_TOTAL_BYTES,
    ) -> None:
        self.path = path
        self.max_responses = max_responses
        self.max_total_bytes = max_total_bytes
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, check_same_thread=False, timeout=10)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(SCHEMA)
            self._db = db
        return self._db

    def save(self, response: dict[str, Any], items: list[dict[str, Any]]) -> None:
        """Keep a response and the conversation items that follow it; prune the oldest."""
        body, history = json.dumps(response), json.dumps(items)
        size = len(body) + len(history)
        if size > MAX_ENTRY_BYTES:
            return  # checked by fits() before generation; a reply can only add max_tokens text
        with self._lock:
            db = self._conn()
            with db:
                db.execute(
                    "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?)",
                    (response["id"], time.time(), body, history, size),
                )
                self._prune(db)

    def _prune(self, db: sqlite3.Connection) -> None:
        count, total = db.execute(
            "SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM responses"
        ).fetchone()
        while count > self.max_responses or total > self.max_total_bytes:
            row = db.execute("SELECT id, bytes FROM responses ORDER BY created LIMIT 1").fetchone()
            db.execute("DELETE FROM responses WHERE id = ?", (row[0],))
            count, total = count - 1, total - row[1]

    def _row(self, response_id: str, column: str) -> Any:
        with self._lock:
            found = (
                self._conn()
                .execute(f"SELECT {column} FROM responses WHERE id = ?", (response_id,))
                .fetchone()
            )
        return None if found is None else json.loads(found[0])

    def response(self, response_id: str) -> dict[str, Any] | None:
        return self._row(response_id, "response")

    def items(self, response_id: str) -> list[dict[str, Any]] | None:
        return self._row(response_id, "items")

    def delete(self, response_id: str) -> bool:
        with self._lock:
            db = self._conn()
            with db:
                return db.execute("DELETE FROM responses WHERE id = ?", (response_id,)).rowcount > 0

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None


def fits(items: list[dict[str, Any]]) -> bool:
    """Whether a conversation leaves room in one row for the reply."""
    return len(json.dumps(items)) <= MAX_ENTRY_BYTES // 2
