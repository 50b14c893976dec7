"""Conversations in SQLite (WAL): a tree of messages per chat, presets, crash-safe writes.

Messages form a tree through `parent_id`: editing an earlier user message or regenerating a reply
adds a sibling, and the conversation's `leaf_id` says which branch is shown. Every committed write
is durable (WAL + synchronous=FULL). A reply is stored as `streaming` when it starts; if the process
dies before it finishes, the next open marks it `interrupted`. One process holds the history at a
time (an flock on a side file). Nothing here loses a chat: a corrupt file is moved aside, never
overwritten; a locked one is waited for, then refused naming its holder; a read-only one is
read into memory (`read_only` says why); a damaged row is read as damaged (records.py); a
`parent_id` loop ends the shown branch; and a failed read or write (disk full, locked, I/O)
is a one-line HistoryError, so the caller can keep what the user typed.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ember.app.errors import HistoryError
from ember.app.history.connect import DEFAULT_WAIT_S, failure_message, open_database
from ember.app.history.lock import HistoryLock
from ember.app.history.parts import MessagePart, parts_to_json
from ember.app.history.presets import PresetsMixin
from ember.app.history.records import (
    Conversation,
    Message,
    MessageStatus,
    Preset,
    TreeMessage,
    conversation_from_row,
    message_from_row,
)
from ember.app.history.schema import MIGRATIONS, migrate
from ember.text import clean


class History(PresetsMixin):
    """The conversation store; open with `History.open(path)`, close when done."""

    def __init__(
        self,
        db: sqlite3.Connection,
        lock: HistoryLock | None,
        notice: str = "",
        db_path: Path | None = None,
        read_only: str = "",
    ) -> None:
        self._db = db
        self._lock = lock
        self.notice = notice  # a message for the user (e.g. a corrupt file was moved aside)
        self.db_path = db_path
        self.read_only = read_only  # why the history lives in memory only ("" when on disk)
        self.wait_s = DEFAULT_WAIT_S

    @classmethod
    def open(cls, path: Path, wait_s: float = DEFAULT_WAIT_S) -> History:
        """Lock, open (moving a corrupt file aside), migrate, and mark dead replies interrupted.

        A file or folder Ember may not write opens as an in-memory copy with a notice; a file
        another program holds locked is waited for wait_s, then a HistoryError names it."""
        opened = open_database(path, wait_s, _prepare)
        history = cls(opened.db, opened.lock, opened.notice, path, opened.read_only)
        history.wait_s = wait_s
        return history

    def close(self) -> None:
        """Checkpoint, close the database and release the lock."""
        try:
            if not self.read_only:
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error:
            pass  # the commits are in the WAL already; the next open checkpoints them
        finally:
            self._db.close()
            if self._lock is not None:
                self._lock.release()

    @contextmanager
    def _reading(self, what: str) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            raise HistoryError(
                failure_message(what, exc, self.db_path, self.wait_s, "read")
            ) from None

    @contextmanager
    def _writing(self, what: str) -> Iterator[None]:
        """One transaction; any SQLite failure (disk full, locked...) becomes a HistoryError."""
        try:
            with self._db:
                yield
        except sqlite3.IntegrityError:
            raise
        except sqlite3.Error as exc:
            raise HistoryError(failure_message(what, exc, self.db_path, self.wait_s)) from None

    def integrity_check(self) -> str:
        """SQLite's `PRAGMA integrity_check` result ('ok' when sound)."""
        with self._reading("the integrity check"):
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
        with self._writing("the new chat"):
            cur = self._db.execute(
                "INSERT INTO conversations (title, created_at, updated_at, system_prompt, settings_json)"
                " VALUES (?, ?, ?, ?, ?)",
                (clean(title), now, now, clean(system_prompt), json.dumps(settings or {})),
            )
        return self.conversation(int(cur.lastrowid or 0))

    def conversation(self, conversation_id: int) -> Conversation:
        """One conversation by id (HistoryError if it does not exist)."""
        with self._reading(f"conversation {conversation_id}"):
            row = self._db.execute(
                "SELECT * FROM conversations WHERE id=?", (conversation_id,)
            ).fetchone()
        if row is None:
            raise HistoryError(f"conversation {conversation_id} does not exist")
        return conversation_from_row(row)

    def list_conversations(self, search: str = "") -> list[Conversation]:
        """Newest first; `search` matches titles and message text (case-insensitive)."""
        with self._reading("the list of chats"):
            if not search:
                rows = self._db.execute(
                    "SELECT * FROM conversations ORDER BY updated_at DESC, id DESC"
                ).fetchall()
            else:
                escaped = clean(search).replace("\\", "\\\\").replace("%", "\\%")
                pattern = "%" + escaped.replace("_", "\\_") + "%"
                rows = self._db.execute(
                    "SELECT * FROM conversations c WHERE c.title LIKE ?1 ESCAPE '\\' OR EXISTS ("
                    " SELECT 1 FROM messages m WHERE m.conversation_id=c.id"
                    " AND m.content LIKE ?1 ESCAPE '\\') ORDER BY updated_at DESC, id DESC",
                    (pattern,),
                ).fetchall()
        return [conversation_from_row(r) for r in rows]

    def update_conversation(self, conversation_id: int, **changes: Any) -> Conversation:
        """Change title, system_prompt, preset_id or settings (a dict)."""
        allowed = {"title", "system_prompt", "preset_id", "settings"}
        unknown = set(changes) - allowed
        if unknown:
            raise HistoryError(f"cannot change conversation fields {sorted(unknown)}")
        for name, value in changes.items():
            column = "settings_json" if name == "settings" else name
            stored = json.dumps(value) if name == "settings" else value
            stored = clean(stored) if isinstance(stored, str) else stored
            with self._writing(f"the chat's {name.replace('_', ' ')}"):
                self._db.execute(
                    f"UPDATE conversations SET {column}=?, updated_at=? WHERE id=?",
                    (stored, time.time(), conversation_id),
                )
        return self.conversation(conversation_id)

    def delete_conversation(self, conversation_id: int) -> None:
        """Remove a conversation and all its messages."""
        with self._writing("deleting the chat"):
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
        parts: tuple[MessagePart, ...] = (),
    ) -> Message:
        """Append a message under parent_id and make it the conversation's shown leaf."""
        now = time.time()
        with self._writing(f"the {role} message"):
            cur = self._db.execute(
                "INSERT INTO messages"
                " (conversation_id, parent_id, role, content, status, created_at, parts_json)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    conversation_id,
                    parent_id,
                    role,
                    clean(content),
                    status,
                    now,
                    parts_to_json(parts),
                ),
            )
            message_id = int(cur.lastrowid or 0)
            self._db.execute(
                "UPDATE conversations SET leaf_id=?, updated_at=? WHERE id=?",
                (message_id, now, conversation_id),
            )
        return self.message(message_id)

    def message(self, message_id: int) -> Message:
        """One message by id."""
        with self._reading(f"message {message_id}"):
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
        parts: tuple[MessagePart, ...] | None = None,
    ) -> None:
        """Store a reply's text so far (and its final status and stats; its parts when given).

        durable=False skips the fsync (the text survives a killed process, not a power cut): for
        the periodic saves of a streaming reply, so the UI thread never waits on the disk.
        """
        sets, args = ["content=?"], [clean(content)]
        if status is not None:
            sets.append("status=?")
            args.append(status)
        if stats is not None:
            sets.append("stats_json=?")
            args.append(json.dumps(stats))
        if parts is not None:
            sets.append("parts_json=?")
            args.append(parts_to_json(parts))
        with self._reading("the reply"):
            if not durable:
                self._db.execute("PRAGMA synchronous=NORMAL")
            try:
                with self._writing("the reply"):
                    self._db.execute(
                        f"UPDATE messages SET {', '.join(sets)} WHERE id=?", (*args, message_id)
                    )
            finally:
                if not durable:
                    self._db.execute("PRAGMA synchronous=FULL")

    def path(self, conversation_id: int) -> list[Message]:
        """The shown branch: root to the conversation's leaf. A `parent_id` loop (a damaged
        file) ends the branch at the message whose parent repeats, marked damaged."""
        leaf = self.conversation(conversation_id).leaf_id
        with self._reading(f"conversation {conversation_id}"):
            rows = self._db.execute(  # UNION, not UNION ALL: a loop ends the recursion
                "WITH RECURSIVE up(id) AS (SELECT ? UNION"
                " SELECT m.parent_id FROM messages m JOIN up ON m.id=up.id"
                " WHERE m.parent_id IS NOT NULL)"
                " SELECT m.* FROM messages m JOIN up ON m.id=up.id",
                (leaf,),
            ).fetchall()
        by_id = {r["id"]: message_from_row(r) for r in rows}
        ordered: list[Message] = []
        seen: set[int] = set()
        current = leaf
        while current is not None and current in by_id:
            seen.add(current)
            message = by_id[current]
            if message.parent_id in seen:
                note = ", ".join(filter(None, [message.damaged, "parent_id: a loop"]))
                message = dataclasses.replace(message, damaged=note)
                ordered.append(message)
                break
            ordered.append(message)
            current = message.parent_id
        return ordered[::-1]

    def tree(self, conversation_id: int) -> list[Message]:
        """Every message of a conversation, every branch, oldest first."""
        with self._reading(f"conversation {conversation_id}"):
            rows = self._db.execute(
                "SELECT * FROM messages WHERE conversation_id=? ORDER BY id", (conversation_id,)
            ).fetchall()
        return [message_from_row(r) for r in rows]

    def add_tree(
        self, conversation: Conversation, messages: list[TreeMessage], leaf_key: int | None
    ) -> Conversation:
        """Insert a whole conversation (title, times, system prompt, settings of `conversation`;
        its id and preset are ignored) and its messages in one transaction: all or nothing."""
        new_ids: dict[int, int] = {}
        with self._writing("the imported chat"):
            cur = self._db.execute(
                "INSERT INTO conversations"
                " (title, created_at, updated_at, system_prompt, settings_json)"
                " VALUES (?, ?, ?, ?, ?)",
                (
                    clean(conversation.title), conversation.created_at, conversation.updated_at,
                    clean(conversation.system_prompt), json.dumps(conversation.settings),
                ),
            )  # fmt: skip
            conversation_id = int(cur.lastrowid or 0)
            for m in messages:
                parent = None if m.parent_key is None else new_ids[m.parent_key]
                cur = self._db.execute(
                    "INSERT INTO messages (conversation_id, parent_id, role, content, status,"
                    " created_at, stats_json, parts_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        conversation_id, parent, m.role, clean(m.content), m.status,
                        m.created_at, json.dumps(m.stats), parts_to_json(m.parts),
                    ),
                )  # fmt: skip
                new_ids[m.key] = int(cur.lastrowid or 0)
            leaf = None if leaf_key is None else new_ids[leaf_key]
            self._db.execute(
                "UPDATE conversations SET leaf_id=? WHERE id=?", (leaf, conversation_id)
            )
        return self.conversation(conversation_id)

    def siblings(self, message_id: int) -> list[Message]:
        """The message and its alternatives (same parent), oldest first."""
        msg = self.message(message_id)
        with self._reading(f"message {message_id}"):
            rows = self._db.execute(
                "SELECT * FROM messages WHERE conversation_id=? AND parent_id IS ? ORDER BY id",
                (msg.conversation_id, msg.parent_id),
            ).fetchall()
        return [message_from_row(r) for r in rows]

    def select_branch(self, message_id: int) -> None:
        """Show the branch through message_id, down to its newest descendant."""
        msg = self.message(message_id)
        leaf, seen = message_id, {message_id}
        with self._reading(f"message {message_id}"):
            while True:
                row = self._db.execute(
                    "SELECT id FROM messages WHERE parent_id=? ORDER BY id DESC LIMIT 1", (leaf,)
                ).fetchone()
                if row is None or int(row[0]) in seen:  # the end, or a loop
                    break
                leaf = int(row[0])
                seen.add(leaf)
        self.set_leaf(msg.conversation_id, leaf)

    def set_leaf(self, conversation_id: int, leaf_id: int | None) -> None:
        """Show the branch ending at leaf_id (None: an empty branch before the first message)."""
        with self._writing("the shown branch"):
            self._db.execute(
                "UPDATE conversations SET leaf_id=? WHERE id=?", (leaf_id, conversation_id)
            )


def _prepare(db: sqlite3.Connection, path: Path) -> None:
    migrate(db, path)
    with db:
        db.execute("UPDATE messages SET status='interrupted' WHERE status='streaming'")


__all__ = ["MIGRATIONS", "Conversation", "History", "Message", "MessageStatus", "Preset"]
