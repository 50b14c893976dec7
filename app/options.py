"""Settings file + environment + flags -> EngineOptions: the one place every caller gets them.

The TUI, `ember run`, `ember eval`, `ember bench` and `ember serve` all build their options here:
a flag given on the command line wins, else the settings file's value (which an `EMBER_<FIELD>`
variable overrides, app/config.py), else the default. Flags and settings obey one set of rules
(app/rules.py), so a bad value is the same one-line error wherever it comes from.

`draft = "auto"` (the default) reaches the engine as "auto" from every caller, and means what
the README says: prompt lookup on the torch runner, whose batched logits equal one-token
decoding, and no drafting on llama.cpp (engine/speculative/choice.py: DEFAULT_DRAFT,
NOT_BATCH_INVARIANT).

Paths come from ember.paths: prefix snapshots in <cache dir>/prefix, the torch runner's packed
weights in <cache dir>/packed (`EMBER_PACKED_CACHE=DIR` moves them, `=off` turns them off),
`--runner auto`'s measured choices in <cache dir>/runner-choice.json (`EMBER_RUNNER_CHOICE=DIR`
moves the file, `=off` measures at every load: engine/runners/runner_choice.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ember.app.config import Settings, load_settings
from ember.app.errors import ConfigError
from ember.app.parameters import REPETITION_NAMES, SAMPLING_NAMES
from ember.app.parameters.flags import add_flag, add_flags
from ember.app.rules import FLAG_RUNNERS, check_flag, check_setting, parse_breakers, parse_ctx
from ember.paths import Paths, get_paths

if TYPE_CHECKING:
    from ember.engine.api import EngineOptions, SamplingParams

# the table's sampling settings (temperature ... max_tokens), each with its flag
SAMPLING_FLAGS = SAMPLING_NAMES
# repetition control (README "Repetition"): DRY and the loop detector; settings and flags alike
# (dry_sequence_breakers is a JSON list of strings, parsed into the engine's tuple)
REPETITION_FLAGS = REPETITION_NAMES

PACKED_CACHE_ENV = "EMBER_PACKED_CACHE"
RUNNER_CHOICE_ENV = "EMBER_RUNNER_CHOICE"
_OFF = ("off", "0", "no", "false")
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


@dataclass(frozen=True)
class EngineFlags:
    """Engine flags as given on a command line; None (or False) = not given: the settings apply."""

    runner: str | None = None
    remote: str | None = None  # --remote URL: run the model on an OpenAI-compatible server
    device: str | None = None
    threads: int | None = None
    ctx: int | None = None  # AUTO_CTX (0) = --ctx auto
    kv_cache: str | None = None  # f16 | q8 | q4
    sink: int | None = None
    window: int | None = None
    kv_budget: int | None = None  # bytes
    no_prefix_cache: bool = False
    draft: str | None = None
    draft_tokens: int | None = None
    chat_format: str | None = None  # auto | template | scaffold

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> EngineFlags:
        """The engine flags of parsed arguments (flags a command lacks count as not given)."""
        values: dict[str, Any] = {
            f.name: getattr(args, f.name, None) for f in dataclasses.fields(cls)
        }
        values["no_prefix_cache"] = bool(values["no_prefix_cache"])
        return cls(**values)

    def validate(self) -> None:
        """ConfigError naming the first flag whose value breaks its rule."""
        if self.runner is not None and self.runner not in FLAG_RUNNERS:
            raise ConfigError(f"--runner {self.runner}: choose torch, llama.cpp, remote or auto")
        names = (
            "device",
            "threads",
            "ctx",
            "kv_cache",
            "sink",
            "window",
            "draft",
            "draft_tokens",
            "chat_format",
        )
        for name in names:
            check_flag("--" + name.replace("_", "-"), getattr(self, name))
        check_flag("--kv-budget", self.kv_budget)


def parse_bytes(text: str) -> int:
    """'512M', '2G', '1.5GiB' or a plain byte count -> bytes."""
    match = _SIZE.match(text)
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size (try 512M or 2G)")
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


def ctx_arg(text: str) -> int:
    """--ctx's value: "auto" (AUTO_CTX) or a token count."""
    try:
        return parse_ctx(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not auto or a token count") from None


def add_context_flags(parser: argparse.ArgumentParser) -> None:
    """--ctx and --kv-cache (every command that loads a model, `ember chat` included)."""
    add_flag(parser, "ctx", kind=ctx_arg)
    add_flag(parser, "kv_cache")


def add_engine_flags(parser: argparse.ArgumentParser, *, remote: bool = True) -> None:
    """Flags that choose how the model is loaded (app/parameters' rows); defaults come from
    the settings file."""
    runners = "torch | llama.cpp | remote | auto" if remote else "torch | llama.cpp | auto"
    parser.add_argument("--runner", help=f"{runners} (default: settings)")
    if remote:
        parser.add_argument(
            "--remote",
            metavar="URL",
            help="an OpenAI-compatible server to run MODEL on (key: $EMBER_REMOTE_API_KEY)",
        )
    add_flags(parser, ("device", "threads"))
    add_context_flags(parser)
    add_flags(parser, ("sink", "window"))
    add_flag(parser, "kv_budget", kind=parse_bytes)
    parser.add_argument(
        "--no-prefix-cache", action="store_true", help="do not reuse cached prompt prefixes"
    )
    add_flags(parser, ("draft", "draft_tokens", "chat_format"))


def add_sampling_flags(parser: argparse.ArgumentParser) -> None:
    """The sampling flags (SAMPLING_FLAGS, then --reasoning-budget and --seed); defaults come
    from the settings file."""
    add_flags(parser, (*SAMPLING_FLAGS, "reasoning_budget", "seed"))


def add_repetition_flags(parser: argparse.ArgumentParser) -> None:
    """DRY and loop-detector flags (REPETITION_FLAGS); defaults come from the settings file."""
    add_flags(parser, REPETITION_FLAGS)


def packed_cache_dir(paths: Paths, env: Mapping[str, str]) -> str:
    """The torch runner's packed-weight folder: $EMBER_PACKED_CACHE, else <cache dir>/packed;
    "" when EMBER_PACKED_CACHE is off."""
    value = env.get(PACKED_CACHE_ENV, "")
    if value.lower() in _OFF and value:
        return ""
    if value:
        return os.path.expanduser(value)
    return str(paths.cache_dir / "packed")


def runner_choice_dir(paths: Paths, env: Mapping[str, str]) -> str:
    """Where `--runner auto` caches its measured choices: $EMBER_RUNNER_CHOICE, else the cache
    dir; "" (measure at every load) when EMBER_RUNNER_CHOICE is off."""
    value = env.get(RUNNER_CHOICE_ENV, "")
    if value.lower() in _OFF and value:
        return ""
    return os.path.expanduser(value) if value else str(paths.cache_dir)


def engine_options(
    model: str,
    settings: Settings | None = None,
    flags: EngineFlags | None = None,
    *,
    paths: Paths | None = None,
    env: Mapping[str, str] | None = None,
) -> EngineOptions:
    """How to load `model`: flags over settings (file + EMBER_<FIELD>) over defaults.

    settings: default load_settings(paths, env); flags: default none given; paths: default
    ember.paths.get_paths(); env: default os.environ (EMBER_PACKED_CACHE). ConfigError names
    the first bad flag; EngineError an inconsistent combination."""
    from ember.engine.api import EngineOptions

    env = os.environ if env is None else env
    paths = paths or get_paths()
    settings = settings or load_settings(paths, dict(env))
    flags = flags or EngineFlags()
    flags.validate()
    if not model.strip():
        raise ConfigError("model: give a registry name, alias, .gguf file or safetensors folder")

    def pick(name: str) -> Any:
        value = getattr(flags, name)
        return getattr(settings, name) if value is None else value

    runner = "remote" if flags.remote else pick("runner")
    return EngineOptions(
        model=model,
        runner=runner,
        device=pick("device"),
        threads=pick("threads"),
        ctx=pick("ctx"),
        kv_cache=pick("kv_cache"),
        sink=pick("sink"),
        window=pick("window"),
        kv_budget_bytes=flags.kv_budget or 0,
        prefix_cache=settings.prefix_cache and not flags.no_prefix_cache,
        draft=pick("draft").strip(),
        draft_tokens=pick("draft_tokens"),
        prefix_cache_dir=str(paths.prefix_cache_dir),
        packed_cache_dir=packed_cache_dir(paths, env),
        runner_choice_dir=runner_choice_dir(paths, env),
        remote_url=flags.remote or "",
        chat_format=pick("chat_format"),
    )


def sampling_params(
    settings: Settings,
    flags: Mapping[str, Any],
    *,
    seed: int | None = None,
    given_as: Literal["flag", "setting"] = "flag",
) -> SamplingParams:
    """SamplingParams for a run or a chat: given values (flags, or a chat's own settings; None
    = not given) over the settings' defaults, for the sampling and the repetition controls
    alike. ConfigError names the first bad value as given: `--temperature 11: ...` for a flag,
    `this chat: setting temperature=11: ...` for a chat's own setting."""
    from ember.engine.api import SamplingParams

    def check(name: str, value: Any) -> None:
        if given_as == "flag":
            check_flag("--" + name.replace("_", "-"), value)
        else:
            check_setting(name, value, "this chat")

    values: dict[str, Any] = {}
    for name in (*SAMPLING_FLAGS, *REPETITION_FLAGS):
        given = flags.get(name)
        check(name, given)
        values[name] = getattr(settings, name) if given is None else given
    check("seed", seed)
    budget = flags.get("reasoning_budget")  # a flag only: no setting, None = unlimited
    check("reasoning_budget", budget)
    breakers = parse_breakers(values.pop("dry_sequence_breakers"))
    assert breakers is not None  # checked above (flag) or by Settings.validate (setting)
    return SamplingParams(
        seed=seed, dry_sequence_breakers=breakers, reasoning_budget=budget, **values
    )
