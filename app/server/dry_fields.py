"""llama-server's DRY fields on a chat or completion body (engine/dry.py defines the penalty).

The names and meanings are llama-server's, so a client written for it works here: dry_multiplier
(0 = off, the server's default), dry_base, dry_allowed_length, dry_penalty_last_n (-1 = all) and
dry_sequence_breakers (strings a repeat never spans). Each bad value is a 400 naming its field.
"""

from __future__ import annotations

from typing import Any

from ember.app.server.errors import RequestInvalid
from ember.engine.api import DRY_BREAKERS

MAX_BREAKERS = 16
MAX_BREAKER_CHARS = 40
FIELDS = (
    "dry_multiplier", "dry_base", "dry_allowed_length", "dry_penalty_last_n",
    "dry_sequence_breakers",
)  # fmt: skip


def _number(body: dict[str, Any], key: str, lo: float, hi: float, default: float) -> float:
    value = body.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not lo <= value <= hi:
        raise RequestInvalid(key, f"must be a number between {lo:g} and {hi:g}")
    return float(value)


def _integer(body: dict[str, Any], key: str, lo: int, hi: int, default: int) -> int:
    value = body.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise RequestInvalid(key, f"must be an integer between {lo} and {hi}")
    return value


def _breakers(body: dict[str, Any]) -> tuple[str, ...]:
    value = body.get("dry_sequence_breakers", list(DRY_BREAKERS))
    if (
        not isinstance(value, list)
        or len(value) > MAX_BREAKERS
        or not all(isinstance(b, str) and 0 < len(b) <= MAX_BREAKER_CHARS for b in value)
    ):
        raise RequestInvalid(
            "dry_sequence_breakers",
            f"must be a list of at most {MAX_BREAKERS} strings of 1 to {MAX_BREAKER_CHARS} chars",
        )
    return tuple(value)


def parse_dry(body: dict[str, Any]) -> dict[str, Any]:
    """SamplingParams keyword arguments for the DRY fields present in body."""
    if not any(key in body for key in FIELDS):
        return {}
    return {
        "dry_multiplier": _number(body, "dry_multiplier", 0.0, 100.0, 0.0),
        "dry_base": _number(body, "dry_base", 1.0, 100.0, 1.75),
        "dry_allowed_length": _integer(body, "dry_allowed_length", 1, 1 << 16, 2),
        "dry_penalty_last_n": _integer(body, "dry_penalty_last_n", -1, 1 << 20, -1),
        "dry_sequence_breakers": _breakers(body),
    }
