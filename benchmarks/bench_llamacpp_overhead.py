"""Ember's llama.cpp runner (and whole engine) vs raw llama-cpp-python: prefill and decode tok/s.

Same GGUF, same threads, repeats interleaved, medians printed with Ember/raw ratios (target:
>= 0.95x, i.e. Ember's overhead per token under 5%).

    python benchmarks/bench_llamacpp_overhead.py [--model PATH] [--threads 1,2] [--prompt 256]
        [--decode 64] [--repeats 3] [--no-engine] [--json]

Default model: the starter GGUF (Gemma 3 270M Q4_K_M).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _model(given: str | None) -> Path:
    if given:
        return Path(given)
    from ember.models.registry.starter import starter_path

    return starter_path(ROOT / "tests" / ".cache" / "models")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model")
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    parser.add_argument("--prompt", type=int, default=256, help="prompt tokens (prefill)")
    parser.add_argument("--decode", type=int, default=64, help="decoded tokens")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-engine", action="store_true", help="skip the whole-engine row")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    from ember.app.loading import resolve_files
    from ember.engine.runners.llamacpp.bench import bench_llamacpp_runner

    rows = [
        bench_llamacpp_runner(
            resolve_files(str(_model(args.model))),
            int(threads),
            prompt_tokens=args.prompt,
            decode_tokens=args.decode,
            repeats=args.repeats,
            with_engine=not args.no_engine,
        )
        for threads in args.threads.split(",")
    ]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"model {rows[0]['model']}, prompt {args.prompt} tokens, decode {args.decode} tokens")
    print("threads  what     raw tok/s  ember tok/s  ratio   engine tok/s  ratio")
    for row in rows:
        for what in ("prefill", "decode"):
            engine = row.get(f"engine_{what}_tok_s")
            engine_ratio = engine / row[f"raw_{what}_tok_s"] if engine else None
            print(
                f"{row['threads']:>7}  {what:<7} {row[f'raw_{what}_tok_s']:>10.1f}"
                f"  {row[f'ember_{what}_tok_s']:>11.1f}  {row[f'{what}_ratio']:>5.2f}x"
                + (f"  {engine:>12.1f}  {engine_ratio:>5.2f}x" if engine else "")
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
