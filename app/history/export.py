"""Chats out of the history: Markdown (the shown branch, to read or share) and JSON (every
branch, with settings and stats: what `importer.py` reads back).

JSON format (`"format": "ember-chats"`, `"version": 1`):

    {"format": "ember-chats", "version": 1, "exported_at": 1700000000.0,
     "conversations": [{"title", "created_at", "updated_at", "system_prompt", "settings",
                        "leaf": 3 | null,
                        "messages": [{"id", "parent": null | id, "role", "content", "status",
                                      "created_at", "stats", "parts": [...]}]}]}

Message ids are the file's own (parents come first); importing gives them new ones.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any

from ember.app.errors import HistoryError
from ember.app.history.parts import MessagePart
from ember.app.history.store import Conversation, History, Message

FORMAT = "ember-chats"
VERSION = 1


def conversation_json(history: History, conversation: Conversation) -> dict[str, Any]:
    """One conversation with all its branches."""
    messages = history.tree(conversation.id)
    return {
        "title": conversation.title,
        "created_at": conversation.created_at,
        "updated_at": conversation.updated_at,
        "system_prompt": conversation.system_prompt,
        "settings": conversation.settings,
        "leaf": conversation.leaf_id,
        "messages": [_message_json(m) for m in messages],
    }


def _message_json(message: Message) -> dict[str, Any]:
    return {
        "id": message.id,
        "parent": message.parent_id,
        "role": message.role,
        "content": message.content,
        "status": message.status,
        "created_at": message.created_at,
        "stats": message.stats,
        "parts": [p.to_json() for p in message.parts],
    }


def export_json(history: History, conversations: list[Conversation]) -> str:
    """The JSON export of conversations (text, UTF-8 when written)."""
    body = {
        "format": FORMAT,
        "version": VERSION,
        "exported_at": time.time(),
        "conversations": [conversation_json(history, c) for c in conversations],
    }
    return json.dumps(body, ensure_ascii=False, indent=1) + "\n"


def conversation_markdown(history: History, conversation: Conversation) -> str:
    """The shown branch as Markdown: a heading per turn, thinking and tool calls apart."""
    lines = [f"# {conversation.title}", ""]
    model = conversation.settings.get("model")
    if model:
        lines += [f"Model: `{model}`", ""]
    if conversation.system_prompt.strip():
        lines += ["## System", "", conversation.system_prompt.strip(), ""]
    for message in history.path(conversation.id):
        who = "You" if message.role == "user" else "Ember"
        note = "" if message.status == "complete" else f" ({message.status})"
        lines += [f"## {who}{note}", ""]
        lines += _parts_markdown(message.parts)
        if not any(p.kind == "text" for p in message.parts):  # else the text parts are it
            lines += [message.content.rstrip(), ""]
    return "\n".join(lines).rstrip() + "\n"


def write_export(path: Path, text: str) -> None:
    """Write an export whole or not at all (temp file + rename); HistoryError naming it."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise HistoryError(f"{path}: cannot write ({exc.strerror or exc})") from None


def export_markdown(history: History, conversations: list[Conversation]) -> str:
    """Several conversations, one after another, split by rules."""
    return "\n---\n\n".join(conversation_markdown(history, c) for c in conversations)


def _parts_markdown(parts: tuple[MessagePart, ...]) -> list[str]:
    lines: list[str] = []
    for part in parts:
        if part.kind == "reasoning" and part.text.strip():
            quoted = "\n".join(
                f"> {line}" if line else ">" for line in part.text.strip().split("\n")
            )
            lines += ["> **Thinking**", ">", quoted, ""]
        elif part.kind == "text" and part.text.strip():
            lines += [part.text.strip(), ""]
        elif part.kind == "tool_call":
            lines += [f"**Tool call** `{part.name}`", "", *_fenced(part.arguments, "json"), ""]
        elif part.kind == "file":
            lines += [f"**Attached** `{part.name}`", "", *_fenced(part.text), ""]
        elif part.kind == "tool_result":
            lines += [f"**Tool result** `{part.name}` ({part.status})", "", *_fenced(part.text), ""]
    return lines


def _fenced(text: str, language: str = "") -> list[str]:
    """A code block whose fence is longer than any backtick run inside (so it cannot end early)."""
    longest = run = 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    fence = "`" * max(3, longest + 1)
    return [fence + language, text, fence]
