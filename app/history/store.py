"""Conversations in SQLite (WAL): a tree of messages per chat, presets, crash-safe writes.

Messages form a tree through `parent_id`: editing an earlier user message or regenerating a reply
adds a sibling, and the conversation's `leaf_id` says which branch is shown. Every committed write
is durable (WAL + synchronous=FULL). A reply is stored as `streaming` when it starts; if the process
dies before it finishes, the next open marks it `interrupted`. One process holds the history at a
time (an flock on a side file); a database SQLite cannot read is moved aside, never overwritten.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ember.app.errors import HistoryError
from ember.app.history.lock import HistoryLock
from ember.app.history.parts import MessagePart, parts_from_json, parts_to_json

MessageStatus = str  # complete | streaming | stopped | interrupted | error


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


# Append-only: never edit or reorder an entry, add m002_... for a schema change.
MIGRATIONS: list[tuple[str, Callable[[sqlite3.Connection], None]]] = [
    ("m001_initial", _m001_initial),
    ("m002_message_parts", _m002_message_parts),
]


@dataclass(frozen=True)
class Conversation:
    """One chat: its title, shown branch, system prompt and per-chat settings."""

    id: int
    title: str
    created_at: float
    updated_at: float
    leaf_id: int | None
    system_prompt: str
    preset_id: int | None
    settings: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Message:
    """One stored turn; `parent_id` links it into the conversation's tree."""

    id: int
    conversation_id: int
    parent_id: int | None
    role: str
    content: str
    status: MessageStatus
    created_at: float
    stats: dict[str, Any] = field(default_factory=dict)
    parts: tuple[MessagePart, ...] = ()  # reasoning, tool calls and results (parts.py)


@dataclass(frozen=True)
class TreeMessage:
    """A message to insert with `History.add_tree`: `key` and `parent_key` are the caller's
    own ids (an export file's), mapped to new ids; a parent comes before its children."""

    key: int
    parent_key: int | None
    role: str
    content: str
    status: MessageStatus = "complete"
    created_at: float = 0.0
    stats: dict[str, Any] = field(default_factory=dict)
    parts: tuple[MessagePart, ...] = ()


@dataclass(frozen=True)
class Preset:
    """A named system prompt."""

    id: int
    name: str
    content: str


def _conversation(row: sqlite3.Row) -> Conversation:
    return Conversation(
        row["id"], row["title"], row["created_at"], row["updated_at"], row["leaf_id"],
        row["system_prompt"], row["preset_id"], json.loads(row["settings_json"]),
    )  # fmt: skip


def _message(row: sqlite3.Row) -> Message:
    return Message(
        row["id"], row["conversation_id"], row["parent_id"], row["role"], row["content"],
        row["status"], row["created_at"], json.loads(row["stats_json"]),
        parts_from_json(row["parts_json"]),
    )  # fmt: skip


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
            db, notice = _connect_checked(path)
            _migrate(db, path)
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
        return _conversation(row)

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
        return [_conversation(r) for r in rows.fetchall()]

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
        parts: tuple[MessagePart, ...] = (),
    ) -> Message:
        """Append a message under parent_id and make it the conversation's shown leaf."""
        now = time.time()
        with self._db:
            cur = self._db.execute(
                "INSERT INTO messages"
                " (conversation_id, parent_id, role, content, status, created_at, parts_json)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (conversation_id, parent_id, role, content, status, now, parts_to_json(parts)),
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
        return _message(row)

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
        sets, args = ["content=?"], [content]
        if status is not None:
            sets.append("status=?")
            args.append(status)
        if stats is not None:
            sets.append("stats_json=?")
            args.append(json.dumps(stats))
        if parts is not None:
            sets.append("parts_json=?")
            args.append(parts_to_json(parts))
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
        by_id = {r["id"]: _message(r) for r in rows}
        ordered: list[Message] = []
        current = leaf
        while current is not None and current in by_id:
            ordered.append(by_id[current])
            current = by_id[current].parent_id
        return ordered[::-1]

    def tree(self, conversation_id: int) -> list[Message]:
        """Every message of a conversation, every branch, oldest first."""
        rows = self._db.execute(
            "SELECT * FROM messages WHERE conversation_id=? ORDER BY id", (conversation_id,)
        ).fetchall()
        return [_message(r) for r in rows]

    def add_tree(
        self, conversation: Conversation, messages: list[TreeMessage], leaf_key: int | None
    ) -> Conversation:
        """Insert a whole conversation (title, times, system prompt, settings of `conversation`;
        its id and preset are ignored) and its messages in one transaction: all or nothing."""
        new_ids: dict[int, int] = {}
        with self._db:
            cur = self._db.execute(
                "INSERT INTO conversations"
                " (title, created_at, updated_at, system_prompt, settings_json)"
                " VALUES (?, ?, ?, ?, ?)",
                (
                    conversation.title, conversation.created_at, conversation.updated_at,
                    conversation.system_prompt, json.dumps(conversation.settings),
                ),
            )  # fmt: skip
            conversation_id = int(cur.lastrowid or 0)
            for m in messages:
                parent = None if m.parent_key is None else new_ids[m.parent_key]
                cur = self._db.execute(
                    "INSERT INTO messages (conversation_id, parent_id, role, content, status,"
                    " created_at, stats_json, parts_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        conversation_id, parent, m.role, m.content, m.status, m.created_at,
                        json.dumps(m.stats), parts_to_json(m.parts),
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
        rows = self._db.execute(
            "SELECT * FROM messages WHERE conversation_id=? AND parent_id IS ? ORDER BY id",
            (msg.conversation_id, msg.parent_id),
        ).fetchall()
        return [_message(r) for r in rows]

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


def _connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.isolation_level = "DEFERRED"  # `with db:` wraps each write in one transaction
    db.row_factory = sqlite3.Row
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")  # a commit the user saw survives a crash or power loss
    db.execute("PRAGMA foreign_keys=ON")
    db.execute("PRAGMA busy_timeout=2000")
    return db


def _connect_checked(path: Path) -> tuple[sqlite3.Connection, str]:
    """Open path; if SQLite finds it corrupt, move it (and its WAL) aside and start fresh."""
    reason = ""
    if path.exists():
        try:
            db = _connect(path)
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
        return _connect(path), notice
    return _connect(path), ""


def _migrate(db: sqlite3.Connection, path: Path) -> None:
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
