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
from ember.paths import Paths, get_paths

RUNNERS = ("auto", "torch", "llama.cpp")
DEVICES = ("auto", "cpu", "cuda", "mps")


@dataclass
class Settings:
    """Defaults applied to new chats and one-shot runs; every field has a CLI flag too."""

    model: str = "gemma3-270m"
    runner: str = "auto"
    device: str = "auto"
    threads: int = 0  # 0 = all physical cores
    ctx: int = 4096
    sink: int = 4
    window: int = -1  # -1 = derived from the context length; 0 = off
    draft: str = "auto"  # auto | none | lookup | self | MODEL
    draft_tokens: int = 4
    prefix_cache: bool = True
    system_prompt: str = ""
    temperature: float = 0.7
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    repeat_penalty: float = 1.0
    max_tokens: int = 1024
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ConfigError naming the first invalid field."""
        checks: list[tuple[str, bool, str]] = [
            ("runner", self.runner in RUNNERS, f"must be one of {', '.join(RUNNERS)}"),
            ("device", self.device in DEVICES, f"must be one of {', '.join(DEVICES)}"),
            ("threads", 0 <= self.threads <= 1024, "must be between 0 and 1024"),
            ("ctx", 16 <= self.ctx <= 1 << 20, "must be between 16 and 1048576"),
            ("sink", 0 <= self.sink <= 1024, "must be between 0 and 1024"),
            ("window", -1 <= self.window <= 1 << 20, "must be -1 (auto), 0 (off) or a token count"),
            ("draft_tokens", 1 <= self.draft_tokens <= 32, "must be between 1 and 32"),
            ("temperature", 0.0 <= self.temperature <= 10.0, "must be between 0 and 10"),
            ("top_k", 0 <= self.top_k <= 1 << 20, "must be >= 0"),
            ("top_p", 0.0 < self.top_p <= 1.0, "must be in (0, 1]"),
            ("min_p", 0.0 <= self.min_p < 1.0, "must be in [0, 1)"),
            ("repeat_penalty", 0.0 < self.repeat_penalty <= 10.0, "must be in (0, 10]"),
            ("max_tokens", 1 <= self.max_tokens <= 1 << 20, "must be >= 1"),
        ]
        for name, ok, reason in checks:
            if not ok:
                raise ConfigError(f"setting {name}={getattr(self, name)!r}: {reason}")


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
            return int(value)
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
            else:
                extra[key] = value
    for name in _FIELD_TYPES:
        env_key = f"EMBER_{name.upper()}"
        if env_key in env:
            values[name] = _coerce(name, env[env_key], env_key)
    try:
        return Settings(**values, extra=extra)
    except ConfigError as exc:
        raise ConfigError(f"{cfg}: {exc}") from None


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'"{escaped}"'
    raise ConfigError(f"cannot write setting value {value!r} to TOML")


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
        lines.append(f"{name} = {_toml_value(value)}")
    for name, value in settings.extra.items():
        if isinstance(value, bool | int | float | str):
            lines.append(f"{name} = {_toml_value(value)}")
    tmp = cfg.with_suffix(".toml.tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    os.replace(tmp, cfg)
    return cfg
