"""The history's records: conversations, messages and presets, built from database rows.

A row that another program, a bad disk or an old bug left broken (text that is not UTF-8, a
settings or stats column that is not a JSON object, a timestamp that is not a number or not a
time a calendar can show, a chat setting of the wrong type) still becomes a record: the broken
parts are replaced (U+FFFD, {}, 0, the setting left out) and `damaged` says which they were, so
the app can show the row as damaged instead of failing to open the history.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from typing import Any

from ember.app.history.chat_settings import usable_chat_settings
from ember.app.history.parts import MessagePart, parts_from_json
from ember.text import clean

MAX_TIME_S = 253_402_300_799.0  # 9999-12-31T23:59:59Z: the last second datetime can show
MessageStatus = str  # complete | streaming | stopped | interrupted | error | empty (no text)


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
    damaged: str = ""  # which fields of the row were broken ("" when none)


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
    damaged: str = ""  # which fields of the row were broken ("" when none)
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


def conversation_from_row(row: sqlite3.Row) -> Conversation:
    fields = _Fields(row)
    title, created, updated = (
        fields.text("title"),
        fields.number("created_at"),
        fields.number("updated_at"),
    )
    system_prompt = fields.text("system_prompt")
    settings, dropped = usable_chat_settings(fields.json_object("settings_json"))
    fields.broken += [f"settings_json: {key} is not a valid value" for key in dropped]
    return Conversation(
        row["id"], title, created, updated, row["leaf_id"], system_prompt, row["preset_id"],
        settings, fields.damaged,
    )  # fmt: skip


def message_from_row(row: sqlite3.Row) -> Message:
    fields = _Fields(row)
    parts = fields.parts("parts_json")  # read first: a broken column is noted in `damaged`
    return Message(
        row["id"], row["conversation_id"], row["parent_id"], fields.text("role"),
        fields.text("content"), fields.text("status"), fields.number("created_at"),
        fields.json_object("stats_json"), fields.damaged, parts,
    )  # fmt: skip


class _Fields:
    """Reads a row's columns leniently, noting each one that had to be repaired."""

    def __init__(self, row: sqlite3.Row) -> None:
        self.row = row
        self.broken: list[str] = []

    @property
    def damaged(self) -> str:
        return ", ".join(self.broken)

    def text(self, column: str) -> str:
        value = self.row[column]
        if isinstance(value, bytes):  # a BLOB where text belongs
            value = value.decode("utf-8", "surrogateescape")
        if not isinstance(value, str):
            self.broken.append(f"{column}: not text")
            return "" if value is None else str(value)
        cleaned = clean(value)  # invalid UTF-8 bytes were read as lone surrogates
        if cleaned != value:
            self.broken.append(f"{column}: invalid UTF-8")
        return cleaned

    def number(self, column: str) -> float:
        value = self.row[column]
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if number and 0 <= value <= MAX_TIME_S:  # not NaN, not infinite, before year 10000
            return float(value)
        self.broken.append(f"{column}: not a time" if number else f"{column}: not a number")
        return 0.0

    def parts(self, column: str) -> tuple[MessagePart, ...]:
        try:
            return parts_from_json(self.text(column))
        except ValueError:
            self.broken.append(f"{column}: not a list of parts")
            return ()

    def json_object(self, column: str) -> dict[str, Any]:
        try:
            value = json.loads(self.text(column))
        except ValueError:
            value = None
        if isinstance(value, dict):
            return value
        self.broken.append(f"{column}: not a JSON object")
        return {}
