"""Ember's paths and settings: platformdirs locations, one TOML settings file, env overrides.

`EMBER_HOME` moves every path under one folder (tests use it): config/, data/, cache/.
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

APP_NAME = "ember"
RUNNERS = ("auto", "torch", "llama.cpp")
DEVICES = ("auto", "cpu", "cuda", "mps")
CHAT_FORMATS = ("auto", "template", "scaffold")
DEFAULT_DRY_BREAKERS = '["\\n", ":", "\\"", "*"]'


def parse_breakers(text: str, source: str = "dry_sequence_breakers") -> tuple[str, ...]:
    """A JSON list of non-empty strings (the DRY sequence breakers) -> a tuple."""
    import json

    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{source}={text!r}: not a JSON list ({exc.msg})") from None
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"{source}={text!r}: must be a JSON list of non-empty strings")
    return tuple(value)


@dataclass(frozen=True)
class Paths:
    """Where Ember keeps its files."""

    config_dir: Path
    data_dir: Path
    cache_dir: Path

    @property
    def config_file(self) -> Path:
        return self.config_dir / "config.toml"

    @property
    def models_dir(self) -> Path:
        return self.data_dir / "models"

    @property
    def history_db(self) -> Path:
        return self.data_dir / "history.sqlite3"

    @property
    def registry_db(self) -> Path:
        return self.data_dir / "registry.sqlite3"

    @property
    def prefix_cache_dir(self) -> Path:
        return self.cache_dir / "prefix"

    @property
    def downloads_dir(self) -> Path:
        return self.cache_dir / "downloads"


def get_paths() -> Paths:
    """Paths from `EMBER_HOME` when set, else the platform's config/data/cache folders."""
    home = os.environ.get("EMBER_HOME")
    if home:
        root = Path(home).expanduser()
        return Paths(root / "config", root / "data", root / "cache")
    import platformdirs

    return Paths(
        Path(platformdirs.user_config_dir(APP_NAME)),
        Path(platformdirs.user_data_dir(APP_NAME)),
        Path(platformdirs.user_cache_dir(APP_NAME)),
    )


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
    chat_format: str = "auto"  # auto | template | scaffold (base-model chat; README)
    # DRY repetition penalty and the loop detector (README "Repetition"); 0 = off
    dry_multiplier: float = 0.8
    dry_base: float = 1.75
    dry_allowed_length: int = 2
    dry_penalty_last_n: int = -1  # -1 = the whole context
    dry_sequence_breakers: str = DEFAULT_DRY_BREAKERS  # a JSON list of strings
    loop_min_tokens: int = 64
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
            (
                "chat_format",
                self.chat_format in CHAT_FORMATS,
                f"must be one of {', '.join(CHAT_FORMATS)}",
            ),
            ("draft_tokens", 1 <= self.draft_tokens <= 32, "must be between 1 and 32"),
            ("temperature", 0.0 <= self.temperature <= 10.0, "must be between 0 and 10"),
            ("top_k", 0 <= self.top_k <= 1 << 20, "must be >= 0"),
            ("top_p", 0.0 < self.top_p <= 1.0, "must be in (0, 1]"),
            ("min_p", 0.0 <= self.min_p < 1.0, "must be in [0, 1)"),
            ("repeat_penalty", 0.0 < self.repeat_penalty <= 10.0, "must be in (0, 10]"),
            ("max_tokens", 1 <= self.max_tokens <= 1 << 20, "must be >= 1"),
            ("dry_multiplier", 0.0 <= self.dry_multiplier <= 100.0, "must be in [0, 100]"),
            ("dry_base", 1.0 <= self.dry_base <= 100.0, "must be in [1, 100]"),
            ("dry_allowed_length", 1 <= self.dry_allowed_length <= 1 << 16, "must be >= 1"),
            ("dry_penalty_last_n", self.dry_penalty_last_n >= -1, "must be -1 (all) or >= 0"),
            ("loop_min_tokens", 0 <= self.loop_min_tokens <= 1 << 20, "must be >= 0 (0 = off)"),
        ]
        for name, ok, reason in checks:
            if not ok:
                raise ConfigError(f"setting {name}={getattr(self, name)!r}: {reason}")
        parse_breakers(self.dry_sequence_breakers, "setting dry_sequence_breakers")


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
