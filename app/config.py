"""Ember's settings: one TOML settings file (in ember.paths' config dir), env overrides.

Environment overrides: `EMBER_<FIELD>` for any settings field (e.g. `EMBER_MODEL`, `EMBER_THREADS`).
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from ember.app.errors import ConfigError
from ember.app.parameters import default
from ember.app.rules import (
    AUTO_CTX,
    CHAT_FORMATS,
    DEVICES,
    RUNNERS,
    check_setting,
    parse_ctx,
)
from ember.paths import Paths, get_paths

__all__ = ["CHAT_FORMATS", "DEVICES", "RUNNERS", "Settings", "load_settings", "save_settings"]


@dataclass
class Settings:
    """Defaults applied to new chats and one-shot runs; every field has a CLI flag too.

    Each field's type, range, default and meaning is its row in the parameter table
    (app/parameters: ctx 0 = auto, window -1 = from ctx, kv_cache f16 | q8 | q4, DRY and the
    loop detector 0 = off); the fields here are the table's settings-file keys, in order."""

    model: str = default("model")
    runner: str = default("runner")
    device: str = default("device")
    threads: int = default("threads")
    ctx: int = default("ctx")
    kv_cache: str = default("kv_cache")
    sink: int = default("sink")
    window: int = default("window")
    draft: str = default("draft")
    draft_tokens: int = default("draft_tokens")
    prefix_cache: bool = default("prefix_cache")
    system_prompt: str = default("system_prompt")
    temperature: float = default("temperature")
    top_k: int = default("top_k")
    top_p: float = default("top_p")
    min_p: float = default("min_p")
    repeat_penalty: float = default("repeat_penalty")
    max_tokens: int = default("max_tokens")
    chat_format: str = default("chat_format")
    dry_multiplier: float = default("dry_multiplier")
    dry_base: float = default("dry_base")
    dry_allowed_length: int = default("dry_allowed_length")
    dry_penalty_last_n: int = default("dry_penalty_last_n")
    dry_sequence_breakers: str = default("dry_sequence_breakers")
    loop_min_tokens: int = default("loop_min_tokens")
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ConfigError naming the first invalid field (app/rules.py: the same rules as
        the flags)."""
        for name in _FIELD_TYPES:
            check_setting(name, getattr(self, name))


_FIELD_TYPES = {f.name: f.type for f in fields(Settings) if f.name != "extra"}


def _coerce(name: str, value: Any, source: str) -> Any:
    kind = _FIELD_TYPES[name]
    try:
        if kind == "bool":
            if isinstance(value, bool):
                return value
            if str(value).lower() in ("1", "true", "yes", "on"):
                return True
            if str(value).lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(value)
        if kind == "int":
            if isinstance(value, bool):
                raise ValueError(value)
            return parse_ctx(value) if name == "ctx" else int(value)
        if kind == "float":
            return float(value)
        return str(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{source}: setting {name}={value!r} is not a valid {kind}") from None


def load_settings(paths: Paths | None = None, env: dict[str, str] | None = None) -> Settings:
    """Read the settings file (missing = defaults), then apply `EMBER_<FIELD>` overrides."""
    paths = paths or get_paths()
    env = dict(os.environ) if env is None else env
    values: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    cfg = paths.config_file
    if cfg.exists():
        try:
            raw = tomllib.loads(cfg.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{cfg}: not valid TOML ({exc})") from None
        for key, value in raw.items():
            if key in _FIELD_TYPES:
                values[key] = _coerce(key, value, str(cfg))
                check_setting(key, values[key], str(cfg))
            else:
                extra[key] = value
    for name in _FIELD_TYPES:
        env_key = f"EMBER_{name.upper()}"
        if env_key in env:
            values[name] = _coerce(name, env[env_key], env_key)
            check_setting(name, values[name], env_key)
    return Settings(**values, extra=extra)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'"{escaped}"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    raise ConfigError(f"cannot write setting value {value!r} to TOML")


def _toml_key(key: str) -> str:
    bare = key and all(c.isascii() and (c.isalnum() or c in "_-") for c in key)
    return key if bare else _toml_value(key)


def _toml_table(name: str, table: dict[str, Any]) -> list[str]:
    """`[name]` with its plain keys, then each sub-table as `[name.key]` (e.g. mcp_servers)."""
    lines = ["", f"[{name}]"]
    subs = []
    for key, value in table.items():
        if isinstance(value, dict):
            subs.append((key, value))
        else:
            lines.append(f"{_toml_key(key)} = {_toml_value(value)}")
    for key, value in subs:
        lines += _toml_table(f"{name}.{_toml_key(key)}", value)
    return lines


def save_settings(settings: Settings, paths: Paths | None = None) -> Path:
    """Write the settings file atomically (temp file + rename); unknown keys are kept."""
    settings.validate()
    paths = paths or get_paths()
    cfg = paths.config_file
    cfg.parent.mkdir(parents=True, exist_ok=True)
    lines = ["# Ember settings. Every key can be overridden by EMBER_<KEY> in the environment."]
    for name, value in dataclasses.asdict(settings).items():
        if name == "extra":
            continue
        if name == "ctx" and value == AUTO_CTX:
            value = "auto"
        lines.append(f"{name} = {_toml_value(value)}")
    for name, value in settings.extra.items():
        if isinstance(value, bool | int | float | str | list):
            lines.append(f"{_toml_key(name)} = {_toml_value(value)}")
    for name, value in settings.extra.items():
        if isinstance(value, dict):  # tables come after every plain key
            lines += _toml_table(_toml_key(name), value)
    tmp = cfg.with_suffix(".toml.tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    os.replace(tmp, cfg)
    return cfg
