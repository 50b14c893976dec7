"""Each server API's view of the parameter table: its field names, documented ranges and
defaults, and the one reader every translator validates a body's fields with.

A view's range is the API's documented one (OpenAI's temperature 0..2, Anthropic's 0..1); it
lies inside the engine's range (tests/app/test_parameters.py checks that), so a value an API
accepts is one the engine accepts. A view without a range takes the engine's.

    from ember.app.parameters import ParameterInvalid, read_fields
    try:
        kwargs = read_fields("anthropic", ("temperature", "top_p", "top_k"), body)
    except ParameterInvalid as exc:  # exc.field names the API's field, exc.reason says why
        ...
    SamplingParams(**kwargs)  # fields left at ENGINE_DEFAULT are simply absent
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ember.app.parameters.sampling import MAX_TOKENS, REPETITION, SAMPLING
from ember.app.parameters.types import ENGINE_DEFAULT, Parameter, Range, View, number_text

_FULL = Range(0.0, 1.0)
_PENALTY = Range(-2.0, 2.0)

VIEWS: dict[str, dict[str, View]] = {
    # OpenAI Chat Completions / Completions (+ llama-server's and vLLM's extra fields)
    "openai": {
        "temperature": View("temperature", Range(0.0, 2.0), 1.0),
        "top_p": View("top_p", Range(0.0, 1.0, low_open=True), 1.0),
        "top_k": View("top_k", None, 0),
        "min_p": View("min_p", _FULL, 0.0),
        "presence_penalty": View("presence_penalty", _PENALTY, 0.0),
        "frequency_penalty": View("frequency_penalty", _PENALTY, 0.0),
        "repeat_penalty": View("repeat_penalty", Range(0.01, 10.0), 1.0),
        "seed": View("seed", None, None),
        "max_tokens": View("max_tokens", Range(1, MAX_TOKENS), 256),
        # llama-server's DRY fields: off unless asked for (its own default)
        "dry_multiplier": View("dry_multiplier", None, 0.0),
        "dry_base": View("dry_base", None, 1.75),
        "dry_allowed_length": View("dry_allowed_length", None, 2),
        "dry_penalty_last_n": View("dry_penalty_last_n", None, -1),
    },
    # Anthropic Messages: temperature 0..1 (default 1), top_p, top_k, max_tokens (required)
    "anthropic": {
        "temperature": View("temperature", _FULL, 1.0),
        "top_p": View("top_p", _FULL),
        "top_k": View("top_k"),
        "max_tokens": View("max_tokens", Range(1, MAX_TOKENS)),
    },
    # Ollama's `options` object: Ollama documents no ranges, so the engine's apply
    "ollama": {
        "max_tokens": View("num_predict"),
        "temperature": View("temperature"),
        "top_k": View("top_k"),
        "top_p": View("top_p"),
        "min_p": View("min_p"),
        "repeat_penalty": View("repeat_penalty"),
        "penalty_last_n": View("repeat_last_n"),
        "presence_penalty": View("presence_penalty"),
        "frequency_penalty": View("frequency_penalty"),
        "seed": View("seed", None, None),
    },
}

_PARAMETERS: dict[str, Parameter] = {p.name: p for p in (*SAMPLING, *REPETITION)}


class ParameterInvalid(ValueError):
    """A request field outside its API's rule: field is the API's name for it (with any
    prefix, e.g. options.temperature), reason the rule in words."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def view(api: str, name: str) -> View:
    """api's view of parameter name (KeyError when the API has no such field)."""
    return VIEWS[api][name]


def view_range(api: str, name: str, high: float | None = None) -> Range:
    """The range api accepts for name: its own, else the engine's; high caps it (--max-tokens)."""
    bounds = view(api, name).range or _PARAMETERS[name].bounds()
    assert bounds is not None, name  # every sampling row has a range or its own reader
    return bounds.capped(high)


def check_field(
    api: str,
    name: str,
    value: Any,
    *,
    prefix: str = "",
    high: float | None = None,
    field: str | None = None,
) -> Any:
    """value, when it is of name's type and inside api's range; ParameterInvalid naming the
    API's field otherwise (`temperature: must be between 0 and 2, got 3`). field names an
    alias the value came under (max_completion_tokens for max_tokens)."""
    field = prefix + (field or view(api, name).field)
    kind = _PARAMETERS[name].kind
    if isinstance(value, bool) or not isinstance(value, int | float):
        wanted = "an integer" if kind is int else "a number"
        raise ParameterInvalid(field, f"must be {wanted}, got {type(value).__name__}")
    if kind is int and not isinstance(value, int):
        raise ParameterInvalid(field, f"must be an integer, got {type(value).__name__}")
    bounds = view_range(api, name, high)
    if value not in bounds:
        raise ParameterInvalid(field, f"must be {bounds.text()}, got {number_text(value)}")
    return float(value) if kind is float else value


def read_field(
    api: str, name: str, body: Mapping[str, Any], *, prefix: str = "", high: float | None = None
) -> Any:
    """name's value in body under api's field name, checked (check_field); the view's default
    when the field is absent or null (ENGINE_DEFAULT: leave it to SamplingParams)."""
    spec = view(api, name)
    value = body.get(spec.field)
    if value is None:
        return spec.default
    return check_field(api, name, value, prefix=prefix, high=high)


def read_fields(
    api: str, names: Iterable[str], body: Mapping[str, Any], *, prefix: str = ""
) -> dict[str, Any]:
    """SamplingParams keyword arguments for names read from body (read_field), leaving out the
    ones at ENGINE_DEFAULT."""
    out = {name: read_field(api, name, body, prefix=prefix) for name in names}
    return {name: value for name, value in out.items() if value is not ENGINE_DEFAULT}
