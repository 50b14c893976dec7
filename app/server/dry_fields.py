"""llama-server's DRY fields on a chat or completion body (engine/dry.py defines the penalty).

The names and meanings are llama-server's, so a client written for it works here: dry_multiplier
(0 = off, the server's default), dry_base, dry_allowed_length, dry_penalty_last_n (-1 = all) and
dry_sequence_breakers (strings a repeat never spans). Each bad value is a 400 naming its field; the ranges are the
parameter table's (app/parameters).
"""

from __future__ import annotations

from typing import Any

from ember.app.parameters import MAX_BREAKER_CHARS, MAX_BREAKERS, ParameterInvalid, read_fields
from ember.app.server.errors import RequestInvalid
from ember.engine.api import DRY_BREAKERS

FIELDS = (
    "dry_multiplier", "dry_base", "dry_allowed_length", "dry_penalty_last_n",
    "dry_sequence_breakers",
)  # fmt: skip


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
    try:
        fields = read_fields("openai", FIELDS[:-1], body)
    except ParameterInvalid as exc:
        raise RequestInvalid(exc.field, exc.reason) from None
    return {**fields, "dry_sequence_breakers": _breakers(body)}
