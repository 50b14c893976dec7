"""`--runner auto` for a GGUF model on the CPU: llama.cpp or the torch runner, whichever decodes
faster on this machine for this model. Measured on the model's first load, cached, never guessed.

The first load loads llama.cpp, then the torch runner beside it; after one untimed warm-up each
(a PROMPT_TOKENS-token prompt and one greedy step) they take turns decoding DECODE_TOKENS greedy
tokens, round by round, the first one alternating (runner_timing.py). The median of the
per-round ratios decides; the winner is the runner the engine gets, the other is closed. Decode
alone decides: a chat turn's time is mostly its reply, and a prefill long enough to rank the
runners' batched kernels would cost more than the whole decode measurement. What measuring
costs (loading the second runner, the rounds) is logged and kept with the choice.

The choice is cached in <cache dir>/runner-choice.json (EngineOptions.runner_choice_dir), keyed
by the machine (CPU model, the ISA the torch runner's kernels use, core count), the model digest,
the threads setting and the KV cache type. An entry is measured again when the versions it was
measured with (Ember, llama-cpp-python, torch, the native kernels' sources) are not the ones
installed now. Models only one runner can run skip the measurement: an architecture the torch
runner lacks goes to llama.cpp, and a model one runner fails to load goes to the other.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ember.engine.errors import EngineError
from ember.engine.runners.runner_timing import Clock, time_decode
from ember.errors import EmberError

if TYPE_CHECKING:
    from ember.engine.api import EngineOptions, ModelFiles
    from ember.engine.runners.base import Runner

log = logging.getLogger(__name__)

CACHE_NAME = "runner-choice.json"
FORMAT = 1  # the cache file's layout
CANDIDATES = ("llama.cpp", "torch")  # load order: llama.cpp's load is the cheaper one
# (runner name, options) -> that runner loaded for the model
Loader = Callable[[str, "EngineOptions"], "Runner"]
STAGE = "choosing the faster runner for this model on this machine (once)"


@dataclass(frozen=True)
class RunnerChoice:
    """Which runner auto uses for one model on this machine, and why."""

    runner: str
    reason: str  # one line: the measured speeds, or why nothing was measured
    decode_tok_s: dict[str, float] = field(default_factory=dict)  # median per runner
    ratio: float = 0.0  # median of per-round torch / llama.cpp decode tok/s (0: not measured)
    rounds: int = 0
    cost_s: float = 0.0  # what choosing cost that load: the second runner's load + the rounds
    versions: dict[str, str] = field(default_factory=dict)
    measured_at: float = 0.0  # unix time

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunnerChoice:
        choice = cls(**data)
        if choice.runner not in CANDIDATES:
            raise ValueError(f"runner {choice.runner!r}")
        return choice


def measured_choice(
    runners: dict[str, Runner], progress: Callable[[int, int], None] | None, clock: Clock
) -> RunnerChoice:
    """Time both loaded runners' decode; the faster one, with the figures."""
    timing = time_decode({name: runners[name] for name in CANDIDATES}, progress, clock)
    tok_s = timing.tok_s
    winner = "torch" if timing.ratio > 1.0 else "llama.cpp"
    loser = "llama.cpp" if winner == "torch" else "torch"
    reason = (
        f"{winner}: measured faster here, decode {tok_s[winner]:.1f} vs {loser} "
        f"{tok_s[loser]:.1f} tok/s (median of {timing.rounds} rounds of "
        f"{timing.tokens_per_round} tokens each)"
    )
    return RunnerChoice(winner, reason, tok_s, timing.ratio, timing.rounds)


# ---- the cache --------------------------------------------------------------------------


def machine_key(threads: int) -> str:
    """CPU model, machine, the ISA the torch runner builds for, cores, the threads setting."""
    from ember.engine.runners.torch.native.isa import choose, this_cpu

    cpu = this_cpu()
    try:
        isa = choose().name
    except EngineError:  # a forced EMBER_ISA this CPU lacks: the torch load will say so
        isa = "unrunnable"
    return f"{cpu.model or 'unknown CPU'}|{cpu.machine}|{isa}|{os.cpu_count()} cores|t{threads}"


def cache_key(options: EngineOptions, model: ModelFiles) -> str:
    return f"{machine_key(options.threads)}|kv-{options.kv_cache}|{model.digest}"


@cache
def _kernel_sources_digest() -> str:
    from ember.engine.runners.torch import native

    h = hashlib.sha256()
    csrc = Path(native.__file__).parent / "csrc"
    for path in sorted(csrc.iterdir()) if csrc.is_dir() else ():
        h.update(path.name.encode() + path.read_bytes())
    return h.hexdigest()[:16]


def versions() -> dict[str, str]:
    """What a measurement depends on besides the machine and the model."""
    from importlib import metadata

    from ember import __version__

    found = {"ember": __version__, "native-kernels": _kernel_sources_digest()}
    for dist in ("llama_cpp_python", "torch"):
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            found[dist] = "none"
    return found


class ChoiceCache:
    """The measured choices in one JSON file: {"format", "entries": {key: RunnerChoice}}."""

    def __init__(self, folder: str) -> None:
        self.path = Path(folder) / CACHE_NAME if folder else None

    def _entries(self) -> dict[str, Any]:
        if self.path is None or not self.path.is_file():
            return {}
        try:
            data = json.loads(self.path.read_text())
            entries = data["entries"] if data.get("format") == FORMAT else {}
            return entries if isinstance(entries, dict) else {}
        except (OSError, ValueError, KeyError, AttributeError) as exc:
            log.warning("runner choice cache %s unreadable (%s): measuring again", self.path, exc)
            return {}

    def get(self, key: str, current: dict[str, str]) -> RunnerChoice | None:
        """The entry for key when it was measured with the current versions."""
        raw = self._entries().get(key)
        try:
            choice = RunnerChoice.from_json(raw) if isinstance(raw, dict) else None
        except (TypeError, ValueError):
            return None
        return choice if choice is not None and choice.versions == current else None

    def put(self, key: str, choice: RunnerChoice) -> None:
        """Store one entry (atomic replace; a failure to write only costs a measurement)."""
        if self.path is None:
            return
        entries = self._entries()
        entries[key] = asdict(choice)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".runner-choice-")
            with os.fdopen(fd, "w") as f:
                json.dump({"format": FORMAT, "entries": entries}, f, indent=1)
            os.replace(tmp, self.path)
        except OSError as exc:
            log.warning("runner choice not cached in %s: %s", self.path, exc)


# ---- choosing ---------------------------------------------------------------------------


def only_runner(model: ModelFiles) -> RunnerChoice | None:
    """llama.cpp, without measuring, for an architecture the torch runner lacks."""
    from ember.engine.runners.torch.arch import ARCHS
    from ember.models.files.gguf import open_gguf

    arch = open_gguf(model.path).metadata.get("general.architecture")
    if arch in ARCHS:
        return None
    return RunnerChoice("llama.cpp", f"llama.cpp: the torch runner has no {arch!r} architecture")


def lookup(options: EngineOptions, model: ModelFiles) -> RunnerChoice | None:
    """What auto uses for model without loading anything: the static answer or the cached
    measurement (None: the next load measures). `ember doctor` shows it."""
    return only_runner(model) or ChoiceCache(options.runner_choice_dir).get(
        cache_key(options, model), versions()
    )


def choose_runner(
    options: EngineOptions, model: ModelFiles, load: Loader, clock: Clock = time.perf_counter
) -> Runner:
    """The runner auto means for a GGUF model on the CPU, loaded: from the cache, or measured
    now (both loaded, the loser closed) and cached."""
    known = lookup(options, model)
    if known is not None:
        log.info("runner %s for %s (%s)", known.runner, model.name, known.reason)
        return load(known.runner, options)
    started = clock()
    runners: dict[str, Runner] = {}
    failures: dict[str, EmberError] = {}
    tell = _teller(options)
    try:
        for name in CANDIDATES:
            tell(f"loading the {name} runner", 0, 1)
            try:
                runners[name] = load(name, _with_stage_prefix(options, name))
            except EmberError as exc:  # this runner cannot run the model: the other may
                failures[name] = exc
        choice = _decide(runners, failures, lambda done, total: tell("", done, total), clock)
    except BaseException:
        for runner in runners.values():
            runner.close()
        raise
    for name, runner in runners.items():
        if name != choice.runner:
            runner.close()
    choice = replace(choice, cost_s=clock() - started, versions=versions(), measured_at=time.time())
    ChoiceCache(options.runner_choice_dir).put(cache_key(options, model), choice)
    log.info("runner %s for %s (%s; choosing took %.1f s)", choice.runner, model.name,
             choice.reason, choice.cost_s)  # fmt: skip
    return runners[choice.runner]


def _teller(options: EngineOptions) -> Callable[[str, int, int], None]:
    """progress(STAGE: what, done, total), or nothing when nobody listens."""
    progress = options.progress

    def tell(what: str, done: int, total: int) -> None:
        if progress is not None:
            progress(f"{STAGE}: {what}" if what else STAGE, done, total)

    return tell


def _with_stage_prefix(options: EngineOptions, name: str) -> EngineOptions:
    """options whose progress names the runner's own load stages as part of choosing."""
    import dataclasses

    progress = options.progress
    if progress is None:
        return options

    def prefixed(stage: str, done: int, total: int) -> None:
        progress(f"{STAGE}: {name} runner: {stage}", done, total)

    return dataclasses.replace(options, progress=prefixed)


def _decide(
    runners: dict[str, Runner],
    failures: dict[str, EmberError],
    progress: Callable[[int, int], None],
    clock: Clock,
) -> RunnerChoice:
    if not runners:
        raise failures["llama.cpp"]
    if len(runners) == 1:
        (name,) = runners
        other = next(n for n in CANDIDATES if n != name)
        return RunnerChoice(name, f"{name}: the {other} runner cannot load it ({failures[other]})")
    return measured_choice(runners, progress, clock)
