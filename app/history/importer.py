"""Chats into the history from an `ember-chats` JSON export (export.py).

The file is read through ember/user_files.py (a regular file of at most 256 MiB: a FIFO or
/dev/zero is refused, not waited on) and checked whole before anything is written: its nesting
depth, each field's type and range (times finite and before year 10000, per-chat settings
against chat_settings.py, a reply's stats against reply_stats.py), roles and statuses, each
message's parent (an earlier message of the same chat, so no loops), the shown leaf. What is stored can always be
read back. A file that fails names the field and the reason (`conversations[0].messages[3].role:
...`) and the history is not touched; each chat then goes in in one transaction (all of it or
none of it), with new ids.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ember.app.errors import HistoryError
from ember.app.history.chat_settings import SettingError, check_chat_settings
from ember.app.history.export import FORMAT, VERSION
from ember.app.history.parts import MessagePart
from ember.app.history.records import MAX_TIME_S
from ember.app.history.reply_stats import stats_problem
from ember.app.history.store import Conversation, History, TreeMessage
from ember.text import escape
from ember.user_files import UserFileError, read_user_bytes

MAX_IMPORT_BYTES = 256 * 1024 * 1024
MAX_MESSAGES = 100_000  # per chat
MAX_DEPTH = 32  # objects and lists inside one another; an export nests 8 deep at most
ROLES = ("user", "assistant")
STATUSES = ("complete", "stopped", "interrupted", "error", "empty", "streaming")


@dataclass(frozen=True)
class ImportedChat:
    """A checked chat, ready to insert."""

    conversation: Conversation
    messages: list[TreeMessage]
    leaf_key: int | None
    notes: tuple[str, ...] = ()  # what was left out, and why (retired settings keys)


class _Bad(Exception):
    def __init__(self, where: str, reason: str) -> None:
        super().__init__(f"{where}: {reason}")


def read_export_file(path: Path) -> list[ImportedChat]:
    """Read and check an export file (HistoryError naming the file, the field and the reason)."""
    try:
        raw = read_user_bytes(path, "", MAX_IMPORT_BYTES)
    except UserFileError as exc:
        raise HistoryError(str(exc)) from None
    try:
        return parse_export(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise HistoryError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except HistoryError as exc:
        raise HistoryError(f"{path}: {exc}") from None


def parse_export(text: str) -> list[ImportedChat]:
    """Check an export's text (HistoryError naming the field and the reason)."""
    try:
        body = json.loads(text)
    except ValueError as exc:
        raise HistoryError(f"not JSON ({exc})") from None
    except RecursionError:
        raise HistoryError(f"nested more than {MAX_DEPTH} deep") from None
    try:
        _check_depth(body)
        body = _object(body, "the file")
        if body.get("format") != FORMAT:
            raise _Bad("format", f"must be {FORMAT!r} (an Ember JSON export)")
        if body.get("version") != VERSION:
            raise _Bad("version", f"{body.get('version')!r} is not {VERSION} (a newer Ember?)")
        chats = body.get("conversations")
        if not isinstance(chats, list):
            raise _Bad("conversations", "must be a list")
        return [_chat(c, f"conversations[{i}]") for i, c in enumerate(chats)]
    except _Bad as exc:
        raise HistoryError(str(exc)) from None


def import_chats(history: History, chats: list[ImportedChat]) -> list[Conversation]:
    """Insert checked chats, each in one transaction; returns the new conversations."""
    return [history.add_tree(c.conversation, c.messages, c.leaf_key) for c in chats]


def _chat(value: Any, where: str) -> ImportedChat:
    chat = _object(value, where)
    messages = chat.get("messages")
    if not isinstance(messages, list):
        raise _Bad(f"{where}.messages", "must be a list")
    if len(messages) > MAX_MESSAGES:
        raise _Bad(f"{where}.messages", f"more than {MAX_MESSAGES} messages")
    try:
        settings, notes = check_chat_settings(
            _object(chat.get("settings", {}), f"{where}.settings")
        )
    except SettingError as exc:
        raise _Bad(f"{where}.settings.{escape(exc.key)}", exc.reason) from None
    conversation = Conversation(
        id=0,
        title=_text(chat, "title", where, required=True) or "Imported chat",
        created_at=_number(chat, "created_at", where),
        updated_at=_number(chat, "updated_at", where),
        leaf_id=None,
        system_prompt=_text(chat, "system_prompt", where),
        preset_id=None,
        settings=settings,
    )
    tree: list[TreeMessage] = []
    keys: set[int] = set()
    for i, item in enumerate(messages):
        message = _message(item, f"{where}.messages[{i}]", keys)
        keys.add(message.key)
        tree.append(message)
    leaf = chat.get("leaf")
    if leaf is not None and (not _is_int(leaf) or leaf not in keys):
        raise _Bad(f"{where}.leaf", f"{leaf!r} is not the id of one of its messages")
    return ImportedChat(conversation, tree, leaf, tuple(f"{where}.settings.{n}" for n in notes))


def _message(value: Any, where: str, earlier: set[int]) -> TreeMessage:
    item = _object(value, where)
    key, parent = item.get("id"), item.get("parent")
    if not _is_int(key):
        raise _Bad(f"{where}.id", "must be an integer")
    if key in earlier:
        raise _Bad(f"{where}.id", f"{key} is used twice")
    if parent is not None and (not _is_int(parent) or parent not in earlier):
        raise _Bad(f"{where}.parent", f"{parent!r} is not the id of an earlier message")
    role = item.get("role")
    if role not in ROLES:
        raise _Bad(f"{where}.role", f"{role!r}: must be one of {', '.join(ROLES)}")
    status = item.get("status", "complete")
    if status not in STATUSES:
        raise _Bad(f"{where}.status", f"{status!r}: must be one of {', '.join(STATUSES)}")
    raw_parts = item.get("parts", [])
    if not isinstance(raw_parts, list):
        raise _Bad(f"{where}.parts", "must be a list")
    parts = []
    for j, raw in enumerate(raw_parts):
        try:
            parts.append(MessagePart.from_json(raw))
        except ValueError as exc:
            raise _Bad(f"{where}.parts[{j}]", str(exc)) from None
        if not _encodable(raw):
            raise _Bad(f"{where}.parts[{j}]", "not valid Unicode (a lone surrogate)")
    assert isinstance(key, int)  # _is_int above
    return TreeMessage(
        key=key,
        parent_key=parent,
        role=role,
        content=_text(item, "content", where),
        # a reply that was streaming when exported did not finish: it comes in as interrupted
        status="interrupted" if status == "streaming" else status,
        created_at=_number(item, "created_at", where),
        stats=_stats(item.get("stats", {}), f"{where}.stats"),
        parts=tuple(parts),
    )


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise _Bad(where, "must be an object")
    return dict(value)


def _text(item: dict[str, Any], key: str, where: str, required: bool = False) -> str:
    value = item.get(key, None if required else "")
    if not isinstance(value, str):
        raise _Bad(f"{where}.{key}", "must be text")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _Bad(f"{where}.{key}", "not valid Unicode (a lone surrogate)") from None
    return value


def _number(item: dict[str, Any], key: str, where: str) -> float:
    value = item.get(key, 0.0)
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or not 0 <= value <= MAX_TIME_S:  # NaN and infinities fail too
        raise _Bad(
            f"{where}.{key}", f"{value!r}: must be a time (seconds since 1970, before year 10000)"
        )
    return float(value)


def _stats(value: Any, where: str) -> dict[str, Any]:
    """A reply's stats: the engine's Stats fields, each of its own type (reply_stats.py)."""
    stats = _object(value, where)
    for key, item in stats.items():
        reason = stats_problem(key, item)
        if reason:
            raise _Bad(f"{where}.{escape(key)}", reason)
    return stats


def _check_depth(body: Any) -> None:
    """Refuse nesting deeper than MAX_DEPTH (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(body, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise _Bad("the file", f"nested more than {MAX_DEPTH} deep")
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)


def _encodable(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
