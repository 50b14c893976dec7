"""The one set of value rules for settings and flags: a value breaks the same rule whether it
comes from the settings file, an EMBER_<FIELD> variable or a command-line flag, and the one-line
error names where it came from (`--threads 10000: ...`, `config.toml: setting threads=...`).

The rules themselves are the rows of the parameter table (app/parameters): resource limits are
checked before anything starts, threads are bounded by this machine's CPUs, sizes must be
positive, seeds fit numpy's generators.
"""

from __future__ import annotations

from typing import Any

from ember.app.errors import ConfigError
from ember.app.parameters import (
    DEFAULT_DRY_BREAKERS,
    DEVICES,
    FLAG_RUNNERS,
    MAX_BREAKER_CHARS,
    MAX_BREAKERS,
    MAX_SEED,
    MAX_TOKENS,
    RUNNERS,
    machine_threads,
    parse_breakers,
    problem,
)
from ember.engine.api import AUTO_CTX as AUTO_CTX  # ctx "auto" (flag, setting, EMBER_CTX)
from ember.models.quants.kv_cache import KV_CACHE_TYPES as KV_CACHE_TYPES  # f16 | q8 | q4
from ember.models.text.chat_format import CHAT_FORMATS as CHAT_FORMATS  # auto|template|scaffold

__all__ = [
    "AUTO_CTX",
    "CHAT_FORMATS",
    "DEFAULT_DRY_BREAKERS",
    "DEVICES",
    "FLAG_RUNNERS",
    "KV_CACHE_TYPES",
    "MAX_BREAKERS",
    "MAX_BREAKER_CHARS",
    "MAX_SEED",
    "MAX_TOKENS",
    "RUNNERS",
    "check_flag",
    "check_setting",
    "machine_threads",
    "parse_breakers",
    "parse_ctx",
    "problem",
]


def parse_ctx(text: str) -> int:
    """A ctx value as written in a flag, the settings file or EMBER_CTX: "auto" -> AUTO_CTX,
    else a token count; ValueError for anything else."""
    if str(text).strip().lower() == "auto":
        return AUTO_CTX
    return int(text)


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
