"""The per-chat settings a conversation stores (its `settings` object): each key's type and range.

A chat's settings come from the TUI (new chats, the chat settings dialog, the thinking switch)
and from import files, which can hold anything. Import checks every key here before anything is
written (`check_chat_settings`: unknown keys and wrong types are refused, naming the key), so
what is stored can be read back. Reading (`usable_chat_settings`) is lenient for rows stored
before that check: a known key with a value of the wrong type is dropped and named, so a chat
opens with its defaults instead of crashing on the first message.

`allowed_tools` is retired: tool permission lives only in this machine's settings file
(app/mcp/consent.py). Old chats and exports carry it; it is dropped, never obeyed.

A new per-chat key goes in SETTINGS with its check.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from ember.app.parameters import SAMPLING
from ember.app.rules import problem

RETIRED = {"allowed_tools": "tool permission comes only from this machine's settings file"}
MAX_MODEL_CHARS = 300
Check = Callable[[Any], "str | None"]


def _number(kind: type) -> Check:
    def check(value: Any) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return "must be a number"
        if kind is int and not isinstance(value, int):
            return "must be an integer"
        return None if math.isfinite(value) else "must be a finite number"

    return check


def _seed(value: Any) -> str | None:
    if value is None:
        return None
    return None if isinstance(value, int) and not isinstance(value, bool) else "must be an integer"


def _flag(optional: bool) -> Check:
    def check(value: Any) -> str | None:
        if isinstance(value, bool) or (value is None and optional):
            return None
        return "must be true or false" + (" (or null)" if optional else "")

    return check


def _model(value: Any) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return "must be a model name"
    if len(value) > MAX_MODEL_CHARS or not value.isprintable():
        return f"must be a model name (printable, at most {MAX_MODEL_CHARS} characters)"
    return None


# key -> its type check; the sampling values' ranges are app/parameters' (the flags' own rules)
SETTINGS: dict[str, Check] = {
    "model": _model,
    "seed": _seed,
    **{p.name: _number(p.kind) for p in SAMPLING if p.setting},
    "thinking": _flag(optional=True),  # the template's enable_thinking (None: its default)
    "tools": _flag(optional=False),  # offer the MCP tools in this chat
}


class SettingError(ValueError):
    """One chat setting that cannot be stored: its key and why."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{key}: {reason}")
        self.key, self.reason = key, reason


def setting_problem(key: str, value: Any) -> str | None:
    """Why `key: value` cannot be a chat setting, or None."""
    if key in RETIRED:
        return f"not imported: {RETIRED[key]}"
    check = SETTINGS.get(key)
    if check is None:
        return f"unknown chat setting (known: {', '.join(SETTINGS)})"
    return check(value) or problem(key, value)


def check_chat_settings(settings: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A chat's settings checked for storing: (the settings, notes on retired keys dropped);
    SettingError for the first key that is unknown or has a wrong value."""
    kept: dict[str, Any] = {}
    notes: list[str] = []
    for key, value in settings.items():
        if key in RETIRED:
            notes.append(f"{key}: {setting_problem(key, value)}")
            continue
        reason = setting_problem(key, value)
        if reason:
            raise SettingError(key, reason)
        kept[key] = value
    return kept, notes


def usable_chat_settings(settings: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A stored chat's settings as the app may use them: known keys whose values have the wrong
    type (they would crash the code that reads them) and retired keys are dropped (the chat's
    defaults apply); returns them and what was dropped. A value of the right type out of its
    range stays: sending then fails with the setting's own one-line reason."""
    kept: dict[str, Any] = {}
    dropped: list[str] = []
    for key, value in settings.items():
        if key in RETIRED:
            continue
        check = SETTINGS.get(key)
        if check is not None and check(value):
            dropped.append(key)
            continue
        kept[key] = value
    return kept, dropped
