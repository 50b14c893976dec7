"""Conversations in SQLite (WAL): a tree of messages per chat, presets, crash-safe writes.

Messages form a tree through `parent_id`: editing an earlier user message or regenerating a reply
adds a sibling, and the conversation's `leaf_id` says which branch is shown. Every committed write
is durable (WAL + synchronous=FULL). A reply is stored as `streaming` when it starts; if the process
dies before it finishes, the next open marks it `interrupted`. One process holds the history at a
time (an flock on a side file); a database SQLite cannot read is moved aside, never overwritten.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

from ember.app.errors import HistoryError
from ember.app.history.connect import connect_checked
from ember.app.history.lock import HistoryLock
from ember.app.history.records import (
    Conversation,
    Message,
    MessageStatus,
    Preset,
    conversation_from_row,
    message_from_row,
)
from ember.app.history.schema import MIGRATIONS, migrate


class History:
    """The conversation store; open with `History.open(path)`, close when done."""

    def __init__(self, db: sqlite3.Connection, lock: HistoryLock, notice: str = "") -> None:
        self._db = db
        self._lock = lock
        self.notice = notice  # a message for the user (e.g. a corrupt file was moved aside)

    @classmethod
    def open(cls, path: Path) -> History:
        """Lock, open (moving a corrupt file aside), migrate, and mark dead replies interrupted."""
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = HistoryLock.acquire(path.with_name(path.name + ".lock"))
        try:
            db, notice = connect_checked(path)
            migrate(db, path)
            with db:
                db.execute("UPDATE messages SET status='interrupted' WHERE status='streaming'")
        except BaseException:
            lock.release()
            raise
        return cls(db, lock, notice)

    def close(self) -> None:
        """Checkpoint, close the database and release the lock."""
        try:
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self._db.close()
        finally:
            self._lock.release()

    def integrity_check(self) -> str:
        """SQLite's `PRAGMA integrity_check` result ('ok' when sound)."""
        return str(self._db.execute("PRAGMA integrity_check").fetchone()[0])

    def applied_migrations(self) -> list[str]:
        """Names of the migrations recorded in the database, oldest first."""
        rows = self._db.execute("SELECT name FROM migrations ORDER BY rowid").fetchall()
        return [r[0] for r in rows]

    # conversations

    def create_conversation(
        self,
        title: str = "New chat",
        system_prompt: str = "",
        settings: dict[str, Any] | None = None,
    ) -> Conversation:
        """Add an empty conversation."""
        now = time.time()
        with self._db:
            cur = self._db.execute(
                "INSERT INTO conversations (title, created_at, updated_at, system_prompt, settings_json)"
                " VALUES (?, ?, ?, ?, ?)",
                (title, now, now, system_prompt, json.dumps(settings or {})),
            )
        return self.conversation(int(cur.lastrowid or 0))

    def conversation(self, conversation_id: int) -> Conversation:
        """One conversation by id (HistoryError if it does not exist)."""
        row = self._db.execute(
            "SELECT * FROM conversations WHERE id=?", (conversation_id,)
        ).fetchone()
        if row is None:
            raise HistoryError(f"conversation {conversation_id} does not exist")
        return conversation_from_row(row)

    def list_conversations(self, search: str = "") -> list[Conversation]:
        """Newest first; `search` matches titles and message text (case-insensitive)."""
        if not search:
            rows = self._db.execute("SELECT * FROM conversations ORDER BY updated_at DESC, id DESC")
        else:
            pattern = (
                "%" + search.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            )
            rows = self._db.execute(
                "SELECT * FROM conversations c WHERE c.title LIKE ?1 ESCAPE '\\' OR EXISTS ("
                " SELECT 1 FROM messages m WHERE m.conversation_id=c.id AND m.content LIKE ?1 ESCAPE '\\')"
                " ORDER BY updated_at DESC, id DESC",
                (pattern,),
            )
        return [conversation_from_row(r) for r in rows.fetchall()]

    def update_conversation(self, conversation_id: int, **changes: Any) -> Conversation:
        """Change title, system_prompt, preset_id or settings (a dict)."""
        allowed = {"title", "system_prompt", "preset_id", "settings"}
        unknown = set(changes) - allowed
        if unknown:
            raise HistoryError(f"cannot change conversation fields {sorted(unknown)}")
        for name, value in changes.items():
            column = "settings_json" if name == "settings" else name
            stored = json.dumps(value) if name == "settings" else value
            with self._db:
                self._db.execute(
                    f"UPDATE conversations SET {column}=?, updated_at=? WHERE id=?",
                    (stored, time.time(), conversation_id),
                )
        return self.conversation(conversation_id)

    def delete_conversation(self, conversation_id: int) -> None:
        """Remove a conversation and all its messages."""
        with self._db:
            self._db.execute("DELETE FROM messages WHERE conversation_id=?", (conversation_id,))
            self._db.execute("DELETE FROM conversations WHERE id=?", (conversation_id,))

    # messages

    def add_message(
        self,
        conversation_id: int,
        role: str,
        content: str,
        parent_id: int | None,
        status: MessageStatus = "complete",
    ) -> Message:
        """Append a message under parent_id and make it the conversation's shown leaf."""
        now = time.time()
        with self._db:
            cur = self._db.execute(
                "INSERT INTO messages (conversation_id, parent_id, role, content, status, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (conversation_id, parent_id, role, content, status, now),
            )
            message_id = int(cur.lastrowid or 0)
            self._db.execute(
                "UPDATE conversations SET leaf_id=?, updated_at=? WHERE id=?",
                (message_id, now, conversation_id),
            )
        return self.message(message_id)

    def message(self, message_id: int) -> Message:
        """One message by id."""
        row = self._db.execute("SELECT * FROM messages WHERE id=?", (message_id,)).fetchone()
        if row is None:
            raise HistoryError(f"message {message_id} does not exist")
        return message_from_row(row)

    def update_message(
        self,
        message_id: int,
        content: str,
        status: MessageStatus | None = None,
        stats: dict[str, Any] | None = None,
        durable: bool = True,
    ) -> None:
        """Store a reply's text so far (and its final status and stats).

        durable=False skips the fsync (the text survives a killed process, not a power cut): for
        the periodic saves of a streaming reply, so the UI thread never waits on the disk.
        """
        sets, args = ["content=?"], [content]
        if status is not None:
            sets.append("status=?")
            args.append(status)
        if stats is not None:
            sets.append("stats_json=?")
            args.append(json.dumps(stats))
        if not durable:
            self._db.execute("PRAGMA synchronous=NORMAL")
        try:
            with self._db:
                self._db.execute(
                    f"UPDATE messages SET {', '.join(sets)} WHERE id=?", (*args, message_id)
                )
        finally:
            if not durable:
                self._db.execute("PRAGMA synchronous=FULL")

    def path(self, conversation_id: int) -> list[Message]:
        """The shown branch: root to the conversation's leaf."""
        leaf = self.conversation(conversation_id).leaf_id
        rows = self._db.execute(
            "WITH RECURSIVE up(id) AS (SELECT ? UNION ALL"
            " SELECT m.parent_id FROM messages m JOIN up ON m.id=up.id WHERE m.parent_id IS NOT NULL)"
            " SELECT m.* FROM messages m JOIN up ON m.id=up.id",
            (leaf,),
        ).fetchall()
        by_id = {r["id"]: message_from_row(r) for r in rows}
        ordered: list[Message] = []
        current = leaf
        while current is not None and current in by_id:
            ordered.append(by_id[current])
            current = by_id[current].parent_id
        return ordered[::-1]

    def siblings(self, message_id: int) -> list[Message]:
        """The message and its alternatives (same parent), oldest first."""
        msg = self.message(message_id)
        rows = self._db.execute(
            "SELECT * FROM messages WHERE conversation_id=? AND parent_id IS ? ORDER BY id",
            (msg.conversation_id, msg.parent_id),
        ).fetchall()
        return [message_from_row(r) for r in rows]

    def select_branch(self, message_id: int) -> None:
        """Show the branch through message_id, down to its newest descendant."""
        msg = self.message(message_id)
        leaf = message_id
        while True:
            row = self._db.execute(
                "SELECT id FROM messages WHERE parent_id=? ORDER BY id DESC LIMIT 1", (leaf,)
            ).fetchone()
            if row is None:
                break
            leaf = int(row[0])
        with self._db:
            self._db.execute(
                "UPDATE conversations SET leaf_id=? WHERE id=?", (leaf, msg.conversation_id)
            )

    def set_leaf(self, conversation_id: int, leaf_id: int | None) -> None:
        """Show the branch ending at leaf_id (None: an empty branch before the first message)."""
        with self._db:
            self._db.execute(
                "UPDATE conversations SET leaf_id=? WHERE id=?", (leaf_id, conversation_id)
            )

    # presets

    def list_presets(self) -> list[Preset]:
        """All system prompt presets by name."""
        rows = self._db.execute("SELECT * FROM presets ORDER BY name").fetchall()
        return [Preset(r["id"], r["name"], r["content"]) for r in rows]

    def save_preset(self, name: str, content: str, preset_id: int | None = None) -> Preset:
        """Create a preset, or update the one with preset_id; names are unique."""
        name = name.strip()
        if not name:
            raise HistoryError("a preset needs a name")
        try:
            with self._db:
                if preset_id is None:
                    cur = self._db.execute(
                        "INSERT INTO presets (name, content) VALUES (?, ?)", (name, content)
                    )
                    preset_id = int(cur.lastrowid or 0)
                else:
                    self._db.execute(
                        "UPDATE presets SET name=?, content=? WHERE id=?",
                        (name, content, preset_id),
                    )
        except sqlite3.IntegrityError:
            raise HistoryError(f"a preset named {name!r} already exists") from None
        return Preset(preset_id, name, content)

    def delete_preset(self, preset_id: int) -> None:
        """Remove a preset (chats that used it keep their system prompt text)."""
        with self._db:
            self._db.execute(
                "UPDATE conversations SET preset_id=NULL WHERE preset_id=?", (preset_id,)
            )
            self._db.execute("DELETE FROM presets WHERE id=?", (preset_id,))


__all__ = ["MIGRATIONS", "Conversation", "History", "Message", "MessageStatus", "Preset"]
