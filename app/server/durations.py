"""Ollama's `keep_alive`: a number of seconds or a Go duration ("5m", "1h30m", "-1s"), read the
way Ollama reads it (Go's time.ParseDuration: ASCII digits, one optional sign, units ns us µs ms
s m h), then bounded, so no value a client sends can overflow a timer or a timestamp later.

Ollama's rules: a negative value keeps the model loaded forever; 0 unloads it after the request.
Ember adds: a plain string of digits is seconds (as Ollama's OLLAMA_KEEP_ALIVE reads it), and
anything longer than FOREVER_AFTER_S counts as forever (Go itself overflows at ~292 years).
"""

from __future__ import annotations

import math
import re
from typing import Any

from ember.app.server.errors import RequestInvalid

FOREVER = -1.0
FOREVER_AFTER_S = 10 * 365 * 86400.0  # longer than this is "forever", not a timer
_UNITS_S = {
    "ns": 1e-9, "us": 1e-6, "\u00b5s": 1e-6, "\u03bcs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0,
    "h": 3600.0,
}  # fmt: skip
# one term of a Go duration: digits with an optional fraction (at least one digit), then a unit
_TERM = re.compile(r"([0-9]*)(?:\.([0-9]*))?([^0-9.]*)", re.ASCII)
_MAX_CHARS = 64


def parse_go_duration(text: str) -> float:
    """Seconds of a Go duration string; ValueError (one line) when Go would refuse it."""
    if len(text) > _MAX_CHARS:
        raise ValueError(f"longer than {_MAX_CHARS} characters")
    body = text[1:] if text[:1] in "+-" else text
    sign = -1.0 if text[:1] == "-" else 1.0
    if body == "0":
        return 0.0
    if not body:
        raise ValueError("empty duration")
    total, pos = 0.0, 0
    while pos < len(body):
        match = _TERM.match(body, pos)
        assert match is not None  # every group may be empty: the pattern always matches
        whole, fraction, unit = match.group(1), match.group(2), match.group(3)
        if not whole and not fraction:
            raise ValueError(f"expected a number at {body[pos : pos + 8]!r}")
        if unit not in _UNITS_S:
            raise ValueError("missing unit" if not unit else f"unknown unit {unit[:8]!r}")
        total += float(f"{whole or 0}.{fraction or 0}") * _UNITS_S[unit]
        pos = match.end()
    return sign * total


def keep_alive_s(value: Any, field: str = "keep_alive") -> float | None:
    """keep_alive as seconds (None when absent; FOREVER for negative or huge); a 400 naming the
    field for anything Ollama would refuse (and for NaN, which JSON cannot even carry)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise RequestInvalid(field, 'must be seconds or a duration like "5m"', status=400)
    if isinstance(value, str):
        digits = value[1:] if value[:1] == "-" else value
        try:
            if digits.isascii() and digits.isdigit():
                seconds = float(value)
            else:
                seconds = parse_go_duration(value)
        except ValueError as exc:
            reason = f'must be seconds or a duration like "5m" or "1h30m" ({exc})'
            raise RequestInvalid(field, reason, status=400) from None
    else:
        seconds = float(value)
    if math.isnan(seconds):
        raise RequestInvalid(field, "must be a number of seconds, not NaN", status=400)
    if seconds < 0 or seconds > FOREVER_AFTER_S:
        return FOREVER
    return seconds
