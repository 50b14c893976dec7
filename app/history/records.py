"""The history's records: conversations, messages and presets, built from database rows."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from typing import Any

MessageStatus = str  # complete | streaming | stopped | interrupted | error


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


@dataclass(frozen=True)
class Preset:
    """A named system prompt."""

    id: int
    name: str
    content: str


def conversation_from_row(row: sqlite3.Row) -> Conversation:
    return Conversation(
        row["id"], row["title"], row["created_at"], row["updated_at"], row["leaf_id"],
        row["system_prompt"], row["preset_id"], json.loads(row["settings_json"]),
    )  # fmt: skip


def message_from_row(row: sqlite3.Row) -> Message:
    return Message(
        row["id"], row["conversation_id"], row["parent_id"], row["role"], row["content"],
        row["status"], row["created_at"], json.loads(row["stats_json"]),
    )  # fmt: skip
