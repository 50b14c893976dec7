"""The one set of value rules for settings and flags: a value breaks the same rule whether it
comes from the settings file, an EMBER_<FIELD> variable or a command-line flag, and the one-line
error names where it came from (`--threads 10000: ...`, `config.toml: setting threads=...`).

Resource limits are checked before anything starts: threads are bounded by this machine's CPUs,
sizes must be positive, seeds fit numpy's generators.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from ember.app.errors import ConfigError
from ember.engine.api import AUTO_CTX as AUTO_CTX  # ctx "auto" (flag, setting, EMBER_CTX)
from ember.models.quants.kv_cache import KV_CACHE_TYPES as KV_CACHE_TYPES  # f16 | q8 | q4
from ember.models.text.chat_format import CHAT_FORMATS as CHAT_FORMATS  # auto|template|scaffold

RUNNERS = ("auto", "torch", "llama.cpp")
FLAG_RUNNERS = (*RUNNERS, "remote", "fake")  # remote: --remote URL; fake: tests and demos
DEVICES = ("auto", "cpu", "cuda", "mps")
DEFAULT_DRY_BREAKERS = '["\\n", ":", "\\"", "*"]'  # llama.cpp's, as the JSON a setting holds
MAX_BREAKERS = 16  # the engine's SamplingParams: at most 16 breakers of 1 to 40 characters
MAX_BREAKER_CHARS = 40
MAX_TOKENS = 1 << 20
MAX_SEED = (1 << 64) - 1  # the engine's SamplingParams takes 0..MAX_SEED


def parse_ctx(text: str) -> int:
    """A ctx value as written in a flag, the settings file or EMBER_CTX: "auto" -> AUTO_CTX,
    else a token count; ValueError for anything else."""
    if str(text).strip().lower() == "auto":
        return AUTO_CTX
    return int(text)


def machine_threads() -> int:
    """The most threads any setting or flag may ask for: this machine's CPU count."""
    return os.cpu_count() or 1


Check = tuple[Callable[[Any], bool], str]


def _between(low: float, high: float, reason: str) -> Check:
    return (lambda v: low <= v <= high, reason)


def parse_breakers(text: str) -> tuple[str, ...] | None:
    """DRY's sequence breakers from their JSON list form (`["\\n", ":"]`), None if not valid:
    a list of at most 16 strings of 1 to 40 characters."""
    try:
        value = json.loads(text)
    except (TypeError, json.JSONDecodeError):
        return None
    if not isinstance(value, list) or len(value) > MAX_BREAKERS:
        return None
    if not all(isinstance(v, str) and 0 < len(v) <= MAX_BREAKER_CHARS for v in value):
        return None
    return tuple(value)


def _rules() -> dict[str, Check]:
    cores = machine_threads()
    return {
        "runner": (lambda v: v in RUNNERS, f"must be one of {', '.join(RUNNERS)}"),
        "device": (lambda v: v in DEVICES, f"must be one of {', '.join(DEVICES)}"),
        "threads": _between(
            0, cores, f"must be between 0 (auto: the cores free now) and {cores} (this machine's CPUs)"
        ),
        "ctx": (
            lambda v: v == AUTO_CTX or 16 <= v <= MAX_TOKENS,
            f"must be auto or between 16 and {MAX_TOKENS} tokens",
        ),
        "kv_cache": (
            lambda v: v in KV_CACHE_TYPES,
            f"must be one of {', '.join(KV_CACHE_TYPES)}",
        ),
        "sink": _between(0, 1024, "must be between 0 and 1024 tokens"),
        "window": _between(-1, MAX_TOKENS, "must be -1 (from ctx), 0 (off) or a token count"),
        "draft": (lambda v: bool(v.strip()), "must be auto, none, lookup, self or a model"),
        "draft_tokens": _between(1, 32, "must be between 1 and 32"),
        "chat_format": (lambda v: v in CHAT_FORMATS, f"must be one of {', '.join(CHAT_FORMATS)}"),
        "kv_budget": (lambda v: v > 0, "must be a positive size (e.g. 512M)"),
        "temperature": _between(0.0, 10.0, "must be between 0 and 10"),
        "top_k": _between(0, MAX_TOKENS, "must be >= 0 (0 = off)"),
        "top_p": (lambda v: 0.0 < v <= 1.0, "must be in (0, 1]"),
        "min_p": (lambda v: 0.0 <= v < 1.0, "must be in [0, 1)"),
        "repeat_penalty": (lambda v: 0.0 < v <= 10.0, "must be in (0, 10]"),
        "max_tokens": _between(1, MAX_TOKENS, f"must be between 1 and {MAX_TOKENS}"),
        "dry_multiplier": _between(0.0, 100.0, "must be between 0 (off) and 100"),
        "dry_base": _between(1.0, 100.0, "must be between 1 and 100"),
        "dry_allowed_length": _between(1, 1 << 16, "must be between 1 and 65536 tokens"),
        "dry_penalty_last_n": _between(-1, MAX_TOKENS, "must be -1 (all), 0 (off) or a count"),
        "dry_sequence_breakers": (
            lambda v: parse_breakers(v) is not None,
            f"must be a JSON list of at most {MAX_BREAKERS} strings of 1 to "
            f'{MAX_BREAKER_CHARS} characters, e.g. ["\\n", ":"]',
        ),
        "loop_min_tokens": _between(0, MAX_TOKENS, "must be >= 0 tokens (0 = off)"),
        "seed": _between(0, MAX_SEED, f"must be between 0 and {MAX_SEED}"),
        "port": _between(1, 65535, "must be between 1 and 65535"),
        "max_body_bytes": (lambda v: v > 0, "must be a positive byte count"),
        "max_loaded": _between(1, 64, "must be between 1 and 64 models"),
        "chunk": _between(1, MAX_TOKENS, "must be >= 1 token"),
        "stride": _between(1, MAX_TOKENS, "must be >= 1 token"),
        "score_tokens": _between(0, 1 << 40, "must be >= 0 (0 = all)"),
    }


def problem(name: str, value: Any) -> str | None:
    """Why value breaks name's rule, or None (names without a rule pass)."""
    rule = _rules().get(name)
    if rule is None or value is None:
        return None
    ok, reason = rule
    return None if ok(value) else reason


def check_setting(name: str, value: Any, source: str = "") -> None:
    """ConfigError `[source: ]setting name=value: reason` when a settings value breaks its rule."""
    reason = problem(name, value)
    if reason:
        where = f"{source}: " if source else ""
        raise ConfigError(f"{where}setting {name}={value!r}: {reason}")


def check_flag(flag: str, value: Any, rule: str | None = None) -> None:
    """ConfigError `--flag value: reason` when a flag's value breaks its rule (rule defaults to
    the flag's name: --draft-tokens -> draft_tokens)."""
    name = rule or flag.lstrip("-").replace("-", "_")
    reason = problem(name, value)
    if reason:
        raise ConfigError(f"{flag} {value}: {reason}")
