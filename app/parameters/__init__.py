"""One table of every sampling and engine parameter (name, type, range, default, help).

The CLI flags (flags.py), the settings file and its EMBER_<NAME> variables (app/config.py), the
TUI's settings forms and the server's request schemas (views.py: OpenAI, Anthropic, Ollama) are
all built from or validated against these rows, so a value has one vocabulary and one range
wherever it is set. The engine's SamplingParams and EngineOptions check the same ranges
(tests/app/test_parameters.py keeps them equal), since nothing in engine/ may import app.
"""

from __future__ import annotations

from typing import Any

from ember.app.parameters.engine import (
    CHAT,
    DEVICES,
    ENGINE,
    EVAL,
    FLAG_RUNNERS,
    RUNNERS,
    SERVER,
    machine_threads,
)
from ember.app.parameters.sampling import (
    DEFAULT_DRY_BREAKERS,
    MAX_BREAKER_CHARS,
    MAX_BREAKERS,
    MAX_SEED,
    MAX_TOKENS,
    REPETITION,
    SAMPLING,
    parse_breakers,
)
from ember.app.parameters.types import ENGINE_DEFAULT, Parameter, Range, View
from ember.app.parameters.views import (
    VIEWS,
    ParameterInvalid,
    check_field,
    read_field,
    read_fields,
    view,
    view_range,
)

PARAMETERS: dict[str, Parameter] = {
    p.name: p for p in (*CHAT, *ENGINE, *SAMPLING, *REPETITION, *SERVER, *EVAL)
}
SAMPLING_NAMES = tuple(p.name for p in SAMPLING if p.setting)  # a chat's own sampling values
REPETITION_NAMES = tuple(p.name for p in REPETITION)
SETTING_NAMES = tuple(name for name, p in PARAMETERS.items() if p.setting)

__all__ = [
    "DEFAULT_DRY_BREAKERS",
    "DEVICES",
    "ENGINE_DEFAULT",
    "FLAG_RUNNERS",
    "MAX_BREAKERS",
    "MAX_BREAKER_CHARS",
    "MAX_SEED",
    "MAX_TOKENS",
    "PARAMETERS",
    "REPETITION_NAMES",
    "RUNNERS",
    "SAMPLING_NAMES",
    "SETTING_NAMES",
    "VIEWS",
    "Parameter",
    "ParameterInvalid",
    "Range",
    "View",
    "check_field",
    "default",
    "machine_threads",
    "parameter",
    "parse_breakers",
    "problem",
    "read_field",
    "read_fields",
    "view",
    "view_range",
]


def parameter(name: str) -> Parameter:
    """The row for name (KeyError for a name the table lacks)."""
    return PARAMETERS[name]


def default(name: str) -> Any:
    """name's default: what the settings file starts with."""
    return PARAMETERS[name].default


def problem(name: str, value: Any) -> str | None:
    """Why value breaks name's rule, or None (names without a row, and None, pass)."""
    row = PARAMETERS.get(name)
    return None if row is None else row.problem(value)
