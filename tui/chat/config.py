"""From settings and a conversation to engine inputs: per-chat settings, sampling, messages."""

from __future__ import annotations

from typing import Any

from ember.app import options as app_options
from ember.app.config import Settings
from ember.app.history.store import Message
from ember.app.parameters import SAMPLING_NAMES
from ember.engine.api import ChatMessage, EngineOptions, SamplingParams
from ember.tui.chat.reply_parts import assistant_turns

# statuses whose text the model sees again in later turns
_REPLAYED = {"complete", "stopped", "interrupted"}


def new_chat_settings(settings: Settings) -> dict[str, Any]:
    """The per-chat settings a new conversation starts with: the current defaults."""
    chat: dict[str, Any] = {"model": settings.model, "seed": None}
    chat.update({key: getattr(settings, key) for key in SAMPLING_NAMES})
    return chat


def chat_value(chat: dict[str, Any], settings: Settings, key: str) -> Any:
    """A per-chat setting, falling back to the default (older chats may lack a key)."""
    if key in chat:
        return chat[key]
    return getattr(settings, key, None)


def sampling_params(chat: dict[str, Any], settings: Settings) -> SamplingParams:
    """SamplingParams for a chat: app/options.py's one builder, with this chat's own sampling
    values over the settings (repetition control from the settings, for every chat);
    ConfigError names a bad value as the setting it is (`this chat: setting temperature=11:
    ...`)."""
    values = {key: chat.get(key) for key in SAMPLING_NAMES}
    return app_options.sampling_params(settings, values, seed=chat.get("seed"), given_as="setting")


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
