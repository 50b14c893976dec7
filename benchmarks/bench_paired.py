"""One of Ember's paths and raw llama-cpp-python in one process, in alternating bursts: paired ratios.

Usage: python benchmarks/bench_paired.py [GGUF] [--threads N] [--rounds R] [--burst B]
       [--prompt-tokens P] [--ours torch|llama.cpp|engine] [--engine-runner R]
       [--sampling greedy|defaults] [--clock wall|cpu] [--json]

`--ours` picks Ember's side: `torch` (default) and `llama.cpp` drive that runner through the
Runner contract (forward + argmax); `engine` is Ember's whole engine on `--engine-runner`
(llama.cpp by default): every decode step is `Engine.step()` (schedule, forward, sample with
`--sampling`: greedy, or the settings' defaults (temperature, top-k/p, min-p) seeded, then stop
rules, detokenizing and events), as `ember run` spends it. The raw side is always greedy.
`--clock cpu --threads 1` times this thread's CPU time instead of wall time: on a busy machine
the sides' Python work per token is then compared without the time slices other programs take.

`ember bench` and bench_peers.py start a fresh process per run, which counts cold starts but
leaves each run to whatever the machine was doing in its seconds; on a shared machine their
medians of 3 swing by 10-30% between back-to-back runs. Here both engines stay loaded in one
process and take turns, round by round (which one goes first alternates): a P-token prefill each
(from an empty cache), then B greedy decode steps each (the cache growing by B per round). Each
round gives a ratio torch / llama.cpp of two measurements a second apart; the table shows the
median tok/s of each engine and the median of the per-round ratios. Both engines run the same
GGUF with the same thread count; llama.cpp's loop is `Llama.eval` and its logits (as in
bench_child.py). Idle llama.cpp threads and Ember's pool share the process, so a thread that spins
after its turn costs the other engine, not its own. Default GGUF: the starter model.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

BLOCK = 16  # the torch runner's KV block size here
CLOCKS = {"wall": time.perf_counter, "cpu": time.thread_time}
_clock = [time.perf_counter]


def clock() -> float:
    """--clock wall (default) or cpu: this thread's CPU time, which a busy machine's time
    slices do not inflate (with --threads 1 every engine computes on this thread)."""
    return _clock[0]()


@dataclass
class Paired:
    """One metric: both engines' median tok/s and the median of the per-round ratios."""

    metric: str
    ours_tok_s: float  # Ember's side (--ours)
    llama_tok_s: float
    ratio: float  # median over rounds of ours / llama.cpp
    ratios: list[float]


class TorchSide:
    """Ember's torch runner driven through the Runner contract (prefill, then greedy steps)."""

    def __init__(self, path: Path, threads: int, capacity: int) -> None:
        from ember.engine.runners.torch.runner import TorchOptions, TorchRunner

        self.runner = TorchRunner.load(str(path), TorchOptions(device="cpu", threads=threads))
        self.blocks = capacity // BLOCK + 2
        self.table = list(range(self.blocks))
        self.pos = 0
        self.logits: Any = None  # (1, vocab) float32 of the last step

    def prefill(self, ids: list[int]) -> float:
        from ember.engine.runners.base import ForwardBatch, SeqStep

        self.runner.init_kv(self.blocks, BLOCK)
        t = clock()
        step = SeqStep(0, ids, list(range(len(ids))), 0, self.table)
        self.logits = self.runner.forward(ForwardBatch([step]))[0]
        seconds = clock() - t
        self.pos = len(ids)
        return len(ids) / seconds

    def decode(self, n: int) -> float:
        from ember.engine.runners.base import ForwardBatch, SeqStep

        assert self.logits is not None
        t = clock()
        for _ in range(n):
            tok = int(self.logits[-1].argmax())
            step = SeqStep(0, [tok], [self.pos], self.pos, self.table)
            self.logits = self.runner.forward(ForwardBatch([step]))[0]
            self.pos += 1
        return n / (clock() - t)


class EmberSide(TorchSide):
    """Any loaded Ember runner through the Runner contract (TorchSide's prefill and decode)."""

    def __init__(self, runner: Any, capacity: int) -> None:
        self.runner = runner
        self.blocks = capacity // BLOCK + 2
        self.table = list(range(self.blocks))
        self.pos = 0
        self.logits = None


class LlamaSide:
    """Raw llama-cpp-python: `Llama.eval` and the last row of its logits."""

    def __init__(self, path: Path, threads: int | None, capacity: int, batch: int) -> None:
        """threads None: llama-cpp-python's own defaults."""
        from llama_cpp import Llama

        self.llm = Llama(
            str(path),
            n_ctx=capacity + BLOCK,
            n_batch=batch,
            n_threads=threads,
            n_threads_batch=threads,
            verbose=False,
        )

    def prefill(self, ids: list[int]) -> float:
        self.llm.reset()  # the next eval starts at position 0 and drops the cells after it
        t = clock()
        self.llm.eval(ids)
        return len(ids) / (clock() - t)

    def decode(self, n: int) -> float:
        import llama_cpp
        import numpy as np

        vocab = self.llm.n_vocab()
        t = clock()
        for _ in range(n):
            ptr = llama_cpp.llama_get_logits_ith(self.llm._ctx.ctx, -1)
            self.llm.eval([int(np.argmax(np.ctypeslib.as_array(ptr, shape=(vocab,))))])
        return n / (clock() - t)


def paired(metric: str, ours: list[float], theirs: list[float]) -> Paired:
    ratios = [a / b for a, b in zip(ours, theirs, strict=True)]
    return Paired(
        metric,
        statistics.median(ours),
        statistics.median(theirs),
        statistics.median(ratios),
        ratios,
    )


class EngineSide:
    """Ember's whole engine on one runner; a decode step is one Engine.step()."""

    def __init__(self, path: Path, runner: str, threads: int, capacity: int, sampling: str) -> None:
        from ember.engine.api import EngineOptions, ModelFiles
        from ember.engine.engine import Engine

        options = EngineOptions(
            model=path.stem, runner=runner, device="cpu", threads=threads, ctx=capacity + 64,
            window=0, draft="none", prefix_cache=False,
        )  # fmt: skip
        self.engine = Engine.load(options, ModelFiles(path.stem, path, "gguf", "0" * 64))
        self.sampling = sampling
        self.request_id = 0

    def _params(self, max_tokens: int) -> Any:
        from ember.app.options import sampling_params
        from ember.engine.api import SamplingParams

        if self.sampling == "greedy":
            return SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True)
        from dataclasses import replace

        from ember.app.config import Settings

        defaults = sampling_params(Settings(), {}, seed=1)  # the settings file's defaults
        return replace(defaults, max_tokens=max_tokens, ignore_eos=True)

    def prefill(self, ids: list[int]) -> float:
        from ember.engine.api import GenerationRequest

        self.engine.abort(self.request_id)
        self.request_id += 1
        request = GenerationRequest(
            prompt_ids=tuple(ids), sampling=self._params(1 << 20), request_id=self.request_id
        )
        t = clock()
        self.engine.add_request(request, lambda event: None)
        (state,) = self.engine._states.values()
        while state.num_sampled == 0:
            self.engine.step()
        return len(ids) / (clock() - t)

    def decode(self, n: int) -> float:
        t = clock()
        for _ in range(n):
            self.engine.step()
        return n / (clock() - t)


Side = TorchSide | LlamaSide | EngineSide


def take_turns(
    sides: dict[str, Side], rounds: int, call: Callable[[Side], float]
) -> dict[str, list[float]]:
    """call(side) for every side, rounds times, the first side alternating: tok/s per side."""
    names = list(sides)
    out: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            out[name].append(call(sides[name]))
    return out


def ours_side(
    path: Path, ours: str, threads: int, capacity: int, engine_runner: str, sampling: str
) -> Side:
    """Ember's side of the pair (--ours)."""
    if ours == "torch":
        return TorchSide(path, threads, capacity)
    if ours == "llama.cpp":
        from ember.engine.runners.llamacpp.runner import LlamaCppRunner

        return EmberSide(LlamaCppRunner.load(path, threads=threads, max_sequences=4), capacity)
    return EngineSide(path, engine_runner, threads, capacity, sampling)


def run_paired(
    path: Path,
    threads: int,
    rounds: int,
    burst: int,
    prompt: int,
    ours: str = "torch",
    engine_runner: str = "llama.cpp",
    sampling: str = "greedy",
) -> list[Paired]:
    """rounds x (prefill each, then burst decode steps each), the first engine alternating."""
    from ember.engine.runners.torch.bench_child import prompt_ids

    # every round's prefill restarts the cache; the decode bursts then grow it round by round
    capacity = prompt + rounds * burst + 1
    sides: dict[str, Side] = {
        "ours": ours_side(path, ours, threads, capacity, engine_runner, sampling),
        "llama": LlamaSide(path, threads, capacity, prompt),
    }
    ids = prompt_ids(sides["llama"].llm.n_vocab(), prompt)  # type: ignore[union-attr]
    for side in sides.values():
        side.prefill(ids)  # warm both (first-call setup)
    pre = take_turns(sides, rounds, lambda side: side.prefill(ids))
    for side in sides.values():
        side.prefill(ids)  # both caches hold the prompt again
    dec = take_turns(sides, rounds, lambda side: side.decode(burst))
    return [
        paired(f"prefill tok/s ({prompt} tokens)", pre["ours"], pre["llama"]),
        paired(f"decode tok/s (bursts of {burst})", dec["ours"], dec["llama"]),
    ]


def format_table(rows: list[Paired], threads: int, rounds: int, ours: str = "torch") -> str:
    lines = [
        f"{threads} threads, {rounds} rounds; ratio = median of per-round {ours} / llama.cpp",
        f"{'metric':<34}{'ember':>10}{'llama.cpp':>11}{'ratio':>8}   per-round range",
    ]
    for p in rows:
        lines.append(
            f"{p.metric:<34}{p.ours_tok_s:>10.1f}{p.llama_tok_s:>11.1f}{p.ratio:>7.2f}x"
            f"   {min(p.ratios):.2f}-{max(p.ratios):.2f}x"
        )
    return "\n".join(lines)


def machine_line() -> str:
    """The machine every figure comes from: the CPU, Ember's native ISA build (and whether its
    bf16 prefill path is offered) and the CPU features llama.cpp was built with."""
    import llama_cpp

    from ember.engine.runners.torch.native.choice import offers_bf16
    from ember.engine.runners.torch.native.isa import choose, this_cpu

    cpu, isa = this_cpu(), choose().name
    bf16 = ", bf16 prefill path" if offers_bf16(isa, cpu.flags) else ""
    info = llama_cpp.llama_print_system_info().decode("utf-8", "replace")
    cpu_part = next((p for p in info.split("CPU :")[1:2]), info)
    features = [f.split("=")[0].strip() for f in cpu_part.split("|") if f.strip().endswith("= 1")]
    return (
        f"machine: {cpu.model or 'unknown CPU'} ({cpu.machine}); Ember native ISA {isa}{bf16}; "
        f"llama.cpp built for {' '.join(features) or 'unknown features'}"
    )


def main(argv: list[str] | None = None) -> None:
    from ember.models.registry.starter import starter_path

    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("gguf", nargs="?")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--burst", type=int, default=32, help="decode steps per engine per round")
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--ours", choices=("torch", "llama.cpp", "engine"), default="torch")
    ap.add_argument("--engine-runner", choices=("llama.cpp", "torch"), default="llama.cpp")
    ap.add_argument("--sampling", choices=("greedy", "defaults"), default="greedy")
    ap.add_argument("--clock", choices=tuple(CLOCKS), default="wall")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.clock == "cpu" and args.threads != 1:
        ap.error("--clock cpu: needs --threads 1 (other threads' CPU time is not counted)")
    _clock[0] = CLOCKS[args.clock]
    for flag, value in (
        ("--threads", args.threads),
        ("--rounds", args.rounds),
        ("--burst", args.burst),
        ("--prompt-tokens", args.prompt_tokens),
    ):
        if value < 1:
            ap.error(f"{flag}: must be at least 1 (got {value})")
    root = Path(__file__).resolve().parent.parent
    path = Path(args.gguf) if args.gguf else starter_path(root / "tests" / ".cache" / "models")
    if not path.is_file():
        ap.error(f"{path}: no such GGUF file")
    rows = run_paired(
        path, args.threads, args.rounds, args.burst, args.prompt_tokens, args.ours,
        args.engine_runner, args.sampling,
    )  # fmt: skip
    ours = args.ours if args.ours != "engine" else f"engine ({args.engine_runner}, {args.sampling})"
    if args.json:
        out: dict[str, Any] = {"threads": args.threads, "rounds": args.rounds, "model": str(path),
                               "clock": args.clock, "machine": machine_line()}  # fmt: skip
        print(json.dumps({**out, "ours": ours, "rows": [asdict(p) for p in rows]}))
    else:
        print(machine_line())
        print(f"clock: {args.clock}; " + format_table(rows, args.threads, args.rounds, ours))


if __name__ == "__main__":
    main()
