"""The torch runner and raw llama-cpp-python in one process, in alternating bursts: paired ratios.

Usage: python benchmarks/bench_paired.py [GGUF] [--threads N] [--rounds R] [--burst B]
       [--prompt-tokens P] [--json]

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


@dataclass
class Paired:
    """One metric: both engines' median tok/s and the median of the per-round ratios."""

    metric: str
    torch_tok_s: float
    llama_tok_s: float
    ratio: float  # median over rounds of torch / llama.cpp
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
        t = time.perf_counter()
        step = SeqStep(0, ids, list(range(len(ids))), 0, self.table)
        self.logits = self.runner.forward(ForwardBatch([step]))[0]
        seconds = time.perf_counter() - t
        self.pos = len(ids)
        return len(ids) / seconds

    def decode(self, n: int) -> float:
        from ember.engine.runners.base import ForwardBatch, SeqStep

        assert self.logits is not None
        t = time.perf_counter()
        for _ in range(n):
            tok = int(self.logits[-1].argmax())
            step = SeqStep(0, [tok], [self.pos], self.pos, self.table)
            self.logits = self.runner.forward(ForwardBatch([step]))[0]
            self.pos += 1
        return n / (time.perf_counter() - t)


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
        t = time.perf_counter()
        self.llm.eval(ids)
        return len(ids) / (time.perf_counter() - t)

    def decode(self, n: int) -> float:
        import llama_cpp
        import numpy as np

        vocab = self.llm.n_vocab()
        t = time.perf_counter()
        for _ in range(n):
            ptr = llama_cpp.llama_get_logits_ith(self.llm._ctx.ctx, -1)
            self.llm.eval([int(np.argmax(np.ctypeslib.as_array(ptr, shape=(vocab,))))])
        return n / (time.perf_counter() - t)


def paired(metric: str, ours: list[float], theirs: list[float]) -> Paired:
    ratios = [a / b for a, b in zip(ours, theirs, strict=True)]
    return Paired(
        metric,
        statistics.median(ours),
        statistics.median(theirs),
        statistics.median(ratios),
        ratios,
    )


Side = TorchSide | LlamaSide


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


def run_paired(path: Path, threads: int, rounds: int, burst: int, prompt: int) -> list[Paired]:
    """rounds x (prefill each, then burst decode steps each), the first engine alternating."""
    from ember.engine.runners.torch.bench_child import prompt_ids

    # every round's prefill restarts the cache; the decode bursts then grow it round by round
    capacity = prompt + rounds * burst + 1
    torch_side = TorchSide(path, threads, capacity)
    sides: dict[str, Side] = {
        "torch": torch_side,
        "llama": LlamaSide(path, threads, capacity, prompt),
    }
    ids = prompt_ids(torch_side.runner.info.vocab_size, prompt)
    for side in sides.values():
        side.prefill(ids)  # warm both (first-call setup)
    pre = take_turns(sides, rounds, lambda side: side.prefill(ids))
    for side in sides.values():
        side.prefill(ids)  # both caches hold the prompt again
    dec = take_turns(sides, rounds, lambda side: side.decode(burst))
    return [
        paired(f"prefill tok/s ({prompt} tokens)", pre["torch"], pre["llama"]),
        paired(f"decode tok/s (bursts of {burst})", dec["torch"], dec["llama"]),
    ]


def format_table(rows: list[Paired], threads: int, rounds: int) -> str:
    lines = [
        f"{threads} threads, {rounds} rounds; ratio = median of per-round torch / llama.cpp",
        f"{'metric':<34}{'torch':>10}{'llama.cpp':>11}{'ratio':>8}   per-round range",
    ]
    for p in rows:
        lines.append(
            f"{p.metric:<34}{p.torch_tok_s:>10.1f}{p.llama_tok_s:>11.1f}{p.ratio:>7.2f}x"
            f"   {min(p.ratios):.2f}-{max(p.ratios):.2f}x"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    from ember.models.registry.starter import starter_path

    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("gguf", nargs="?")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--burst", type=int, default=32, help="decode steps per engine per round")
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
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
    rows = run_paired(path, args.threads, args.rounds, args.burst, args.prompt_tokens)
    if args.json:
        out: dict[str, Any] = {"threads": args.threads, "rounds": args.rounds, "model": str(path)}
        print(json.dumps({**out, "rows": [asdict(p) for p in rows]}))
    else:
        print(format_table(rows, args.threads, args.rounds))


if __name__ == "__main__":
    main()
