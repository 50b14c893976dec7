"""From settings and a conversation to engine inputs: per-chat settings, sampling, messages."""

from __future__ import annotations

import dataclasses
from typing import Any

from ember.app import options as app_options
from ember.app.config import Settings
from ember.app.history.store import Message
from ember.engine.api import ChatMessage, EngineOptions, SamplingParams
from ember.tui.chat.reply_parts import assistant_turns

SAMPLING_KEYS = ("temperature", "top_k", "top_p", "min_p", "repeat_penalty", "max_tokens")
# statuses whose text the model sees again in later turns
_REPLAYED = {"complete", "stopped", "interrupted"}


def new_chat_settings(settings: Settings) -> dict[str, Any]:
    """The per-chat settings a new conversation starts with: the current defaults."""
    chat: dict[str, Any] = {"model": settings.model, "seed": None}
    chat.update({key: getattr(settings, key) for key in SAMPLING_KEYS})
    return chat


def chat_value(chat: dict[str, Any], settings: Settings, key: str) -> Any:
    """A per-chat setting, falling back to the default (older chats may lack a key)."""
    if key in chat:
        return chat[key]
    return getattr(settings, key, None)


def sampling_params(chat: dict[str, Any], settings: Settings) -> SamplingParams:
    """SamplingParams for a chat: the settings' (app/options.py, the one builder; repetition
    control from there, for every chat) under this chat's own sampling values (EngineError
    names a bad one)."""
    values = {key: chat_value(chat, settings, key) for key in SAMPLING_KEYS}
    defaults = app_options.sampling_params(settings, {})
    return dataclasses.replace(defaults, seed=chat.get("seed"), **values)


def engine_options(model: str, settings: Settings) -> EngineOptions:
    """How to load `model` under the current defaults (app/options.py, the one builder)."""
    return app_options.engine_options(model, settings)


def chat_messages(system_prompt: str, path: list[Message]) -> tuple[ChatMessage, ...]:
    """The turns the model sees: the system prompt, then the shown branch (failed replies left out)."""
    out: list[ChatMessage] = []
    if system_prompt.strip():
        out.append(ChatMessage("system", system_prompt))
    for message in path:
        if message.role == "user":
            out.append(ChatMessage("user", user_text(message)))
        elif message.status in _REPLAYED and (message.content or message.parts):
            out.extend(assistant_turns(message.parts, message.content))
    return tuple(out)


def file_block(name: str, text: str) -> str:
    """How an attached file reaches the model: fenced by its name, before the message."""
    return f"[file {name}]\n{text.rstrip()}\n[end of file {name}]\n\n"


def user_text(message: Message) -> str:
    """A user message as the model reads it: its attached files, then what the user wrote."""
    files = "".join(file_block(p.name, p.text) for p in message.parts if p.kind == "file")
    return files + message.content
