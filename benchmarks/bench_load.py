"""Decode speed idle and under a controlled load: Ember's default path (threads auto) on both
runners beside raw llama-cpp-python, with its own defaults and with one thread per core.

Usage: python benchmarks/bench_load.py [GGUF] [--busy 0,1,2] [--rounds R] [--burst B] [--json]

For each load level it starts that many busy-loop processes (`while True: pass`, stopped after
the level), waits a second, then lets every engine decode B greedy tokens in turn, R rounds
(the first engine alternating), from a 64-token prompt; the table has the median tok/s of
each and its share of the same engine's speed at the first level. All engines stay loaded in
one process (bench_paired.py's sides), so they see the same machine a second apart. Ember's
runners run as `ember run` does by default: threads=0, i.e. ThreadGovernor's count of the cores
free now, re-measured every 0.5 s while they decode (engine/runners/cpu_offer.py). The line
above the table names the CPU, its ISA and the other programs' load before the run (on a
shared machine "0 busy" is not idle). Default GGUF: the starter model.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_paired import EmberSide, LlamaSide, Side, TorchSide, take_turns  # noqa: E402

PROMPT_TOKENS = 64


def load_sides(path: Path, capacity: int) -> dict[str, Side]:
    from ember.engine.runners.llamacpp.runner import LlamaCppRunner
    from ember.engine.runners.torch.runner import TorchOptions, TorchRunner

    cores = os.cpu_count() or 1
    return {
        "ember llama.cpp (auto)": EmberSide(LlamaCppRunner.load(path, max_sequences=4), capacity),
        "ember torch (auto)": EmberSide(
            TorchRunner.load(str(path), TorchOptions(device="cpu")), capacity
        ),
        "llama-cpp-python defaults": LlamaSide(path, None, capacity, PROMPT_TOKENS),
        f"llama-cpp-python {cores} threads": LlamaSide(path, cores, capacity, PROMPT_TOKENS),
    }


def busy_loops(n: int) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def run_level(sides: dict[str, Side], ids: list[int], rounds: int, burst: int) -> dict[str, float]:
    for side in sides.values():
        side.prefill(ids)
    return {
        name: statistics.median(speeds)
        for name, speeds in take_turns(sides, rounds, lambda s: s.decode(burst)).items()
    }


def machine_line() -> str:
    from ember.engine.runners.cpu_offer import measure
    from ember.engine.runners.torch.native.isa import choose, this_cpu

    model = (
        next(
            (
                line.split(":", 1)[1].strip()
                for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")
            ),
            "unknown CPU",
        )
        if Path("/proc/cpuinfo").exists()
        else "unknown CPU"
    )
    offer, _ = measure(0.5)
    return f"{model}, {this_cpu().machine}, native ISA {choose().name}; {offer.describe()}"


def main(argv: list[str] | None = None) -> None:
    from ember.engine.runners.torch.bench_child import prompt_ids
    from ember.models.registry.starter import starter_path

    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("gguf", nargs="?")
    ap.add_argument("--busy", default="0,1,2", help="busy-loop processes per level")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--burst", type=int, default=16, help="decode steps per engine per round")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    try:
        levels = [int(x) for x in args.busy.split(",")]
    except ValueError:
        ap.error(f"--busy {args.busy}: give counts like 0,1,2")
    if args.rounds < 1 or args.burst < 1 or any(n < 0 or n > 64 for n in levels):
        ap.error("--rounds and --burst must be >= 1, --busy counts 0..64")
    root = Path(__file__).resolve().parent.parent
    path = Path(args.gguf) if args.gguf else starter_path(root / "tests" / ".cache" / "models")
    if not path.is_file():
        ap.error(f"{path}: no such GGUF file")
    print(machine_line(), flush=True)
    capacity = PROMPT_TOKENS + args.rounds * args.burst + 16
    sides = load_sides(path, capacity)
    torch_side = sides["ember torch (auto)"]
    assert isinstance(torch_side, TorchSide)
    ids = prompt_ids(torch_side.runner.info.vocab_size, PROMPT_TOKENS)
    table: dict[int, dict[str, float]] = {}
    for n in levels:
        procs = busy_loops(n)
        try:
            time.sleep(1.0)
            table[n] = run_level(sides, ids, args.rounds, args.burst)
        finally:
            for p in procs:
                p.kill()
                p.wait()
        print(f"  {n} busy: " + ", ".join(f"{k} {v:.1f}" for k, v in table[n].items()), flush=True)
    if args.json:
        print(json.dumps({"model": str(path), "levels": table}))
        return
    first = levels[0]
    head = f"{'decode tok/s':<30}" + "".join(f"{f'{n} busy':>16}" for n in levels)
    print(head)
    for name in sides:
        cells = [
            f"{table[n][name]:>7.1f} ({table[n][name] / table[first][name]:>4.0%})" for n in levels
        ]
        print(f"{name:<30}" + "".join(f"{c:>16}" for c in cells))


if __name__ == "__main__":
    main()
