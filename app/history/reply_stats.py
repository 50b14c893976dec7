"""A stored reply's stats (`Message.stats`): the engine's Stats fields, each of its own type.

Import refuses anything else (`stats_problem`: an unknown key or a wrong type, named); the
chat app reads stored stats through `usable_stats`, which keeps only the fields it can show, so
a row stored before that check (`"ttft_s": "x"`) cannot break the status bar.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from ember.engine.api import Stats

_TYPES = {f.name: str(f.type) for f in dataclasses.fields(Stats)}  # "int" | "float" | "str"
MAX_TEXT_CHARS = 200


def stats_problem(key: str, value: Any) -> str | None:
    """Why `key: value` cannot be a stored reply's stat, or None."""
    kind = _TYPES.get(key)
    if kind is None:
        return f"unknown stat (known: {', '.join(_TYPES)})"
    if kind == "str":
        ok = isinstance(value, str) and len(value) <= MAX_TEXT_CHARS and value.isprintable()
        return None if ok else f"must be text of at most {MAX_TEXT_CHARS} characters"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "must be a number"
    if kind == "int" and not isinstance(value, int):
        return "must be an integer"
    if not math.isfinite(value) or value < 0:
        return f"{value!r}: must be a finite number >= 0"
    return None


def usable_stats(stats: Mapping[str, Any]) -> Stats | None:
    """The stats the app can show (fields with a problem left out); None when none are left."""
    good = {k: v for k, v in stats.items() if stats_problem(k, v) is None}
    return Stats(**good) if good else None
