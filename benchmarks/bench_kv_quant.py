"""What a quantized KV cache costs in perplexity, per runner, at long contexts.

    python benchmarks/bench_kv_quant.py [--model gemma3-270m] [--contexts 4096,16384]
        [--runners torch,llama.cpp] [--threads 2] [--json]

The text is bench_streaming_ppl.py's corpus (license texts, whole files in sorted order), cut to
each context length; each (runner, cache type) scores it as one window that opens with BOS
(`ember eval ppl --mode windows --ctx N` on exactly N tokens), so every token sees the whole
text before it and the cache holds N tokens. Cache types: torch float16 (its default) and int8
(codes + a float32 scale per token and head); llama.cpp f16 (its default), q8_0 and q4_0 (with
flash attention, which llama.cpp needs for a quantized V cache). The cost is the perplexity
ratio to the same runner's float16 cache; bytes per token are the runner's own accounting.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_streaming_ppl import build_corpus  # type: ignore[import-not-found]  # noqa: E402

CACHE_TYPES = {"torch": ("float16", "int8"), "llama.cpp": ("f16", "q8_0", "q4_0")}


@dataclass
class Row:
    runner: str
    cache: str
    context: int
    ppl: float
    kv_bytes_per_token: int
    seconds: float


def _load(runner: str, model: Path, cache: str, threads: int) -> Any:
    if runner == "torch":
        from ember.engine.runners.torch.runner import TorchOptions, TorchRunner

        return TorchRunner.load(model, TorchOptions(device="cpu", threads=threads, kv_dtype=cache))
    from ember.engine.runners.llamacpp.runner import LlamaCppRunner

    return LlamaCppRunner.load(model, threads=threads, kv_type=cache)


def measure(runner_name: str, model: Path, cache: str, ids: list[int], threads: int) -> Row:
    from ember.engine.perplexity import perplexity

    runner = _load(runner_name, model, cache, threads)
    try:
        start = time.perf_counter()
        result = perplexity(runner, ids, mode="windows", ctx=len(ids), bos_id=ids[0])
        seconds = time.perf_counter() - start
        return Row(
            runner_name, cache, len(ids), result.ppl, runner.info.kv_bytes_per_token, seconds
        )
    finally:
        runner.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="gemma3-270m")
    parser.add_argument("--contexts", default="4096,16384")
    parser.add_argument("--runners", default="torch,llama.cpp")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    from ember.app.loading import resolve_files
    from ember.models.text.tokenizers.base import open_tokenizer

    model = resolve_files(args.model).path
    contexts = [int(c) for c in args.contexts.split(",")]
    tokenizer = open_tokenizer(model)
    text, _, _ = build_corpus(tokenizer, max(contexts) + 16)
    all_ids = tokenizer.encode(text, add_bos=True)
    rows = []
    for ctx in contexts:
        for runner in args.runners.split(","):
            for cache in CACHE_TYPES[runner]:
                row = measure(runner, model, cache, all_ids[:ctx], args.threads)
                rows.append(row)
                if not args.json:
                    print(
                        f"{row.runner:>9} {row.cache:>7} ctx {row.context:>6}: ppl {row.ppl:.4f}"
                        f"  ({row.kv_bytes_per_token} B/token, {row.seconds:.0f} s)",
                        flush=True,
                    )
    if args.json:
        print(json.dumps([asdict(r) for r in rows]))
        return
    print("\n| runner | cache | bytes/token | " + " | ".join(f"ppl @ {c}" for c in contexts) + " |")
    print("|---|---|---|" + "---|" * len(contexts))
    for runner in args.runners.split(","):
        base = {
            r.context: r.ppl
            for r in rows
            if r.runner == runner and r.cache == CACHE_TYPES[runner][0]
        }
        for cache in CACHE_TYPES[runner]:
            mine = {r.context: r for r in rows if r.runner == runner and r.cache == cache}
            cells = [f"{mine[c].ppl:.3f} ({mine[c].ppl / base[c] - 1:+.2%})" for c in contexts]
            nbytes = next(iter(mine.values())).kv_bytes_per_token
            print(f"| {runner} | {cache} | {nbytes} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
