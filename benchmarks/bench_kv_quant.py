"""What a quantized KV cache costs in perplexity, memory and decode speed, per runner.

    python benchmarks/bench_kv_quant.py [--model gemma3-270m] [--contexts 4096,16384]
        [--runners torch,llama.cpp] [--caches f16,q8,q4] [--threads 2] [--decode 32] [--json]

The text is bench_streaming_ppl.py's corpus (license texts, whole files in sorted order), cut to
each context length; each (runner, --kv-cache type) scores it as one window that opens with BOS
(`ember eval ppl --mode windows --ctx N` on exactly N tokens), so every token sees the whole
text before it and the cache holds N tokens. Runners load through EngineOptions(kv_cache=...),
the path `ember run --kv-cache` takes: torch f16 (its 16-bit default) and q8 (int8 codes + a
float32 scale per token and head; no q4); llama.cpp f16, q8 (q8_0) and q4 (q4_0, with flash
attention, which llama.cpp needs for a quantized V cache). The cost is the perplexity ratio to
the same runner's f16 cache. KV MiB = the runner's bytes per token x N (the torch runner's pools
are allocated at exactly that size). Decode tok/s: a second pass prefills the first N - D tokens
in 512-token steps, then feeds the last D (--decode) one token per forward, the cache full of
the text: the median one-token forward, inverted.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_streaming_ppl import build_corpus  # type: ignore[import-not-found]  # noqa: E402

CACHE_TYPES = {"torch": ("f16", "q8"), "llama.cpp": ("f16", "q8", "q4")}  # --kv-cache values


@dataclass
class Row:
    runner: str
    cache: str
    context: int
    ppl: float
    kv_bytes_per_token: int
    decode_tok_s: float
    seconds: float

    @property
    def kv_mib(self) -> float:
        return self.kv_bytes_per_token * self.context / (1 << 20)


class TimedRunner:
    """A runner whose one-token forwards are timed (the decode steps); the rest passes through."""

    def __init__(self, runner: Any) -> None:
        self.runner = runner
        self.decode_s: list[float] = []

    def forward(self, batch: Any) -> Any:
        start = time.perf_counter()
        out = self.runner.forward(batch)
        if batch.num_tokens == 1:
            self.decode_s.append(time.perf_counter() - start)
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self.runner, name)


def _load(runner: str, model: Path, cache: str, threads: int) -> Any:
    from ember.engine.api import EngineOptions

    options = EngineOptions(
        model=str(model), runner=runner, device="cpu", threads=threads, kv_cache=cache
    )
    if runner == "torch":
        from ember.engine.runners.torch.runner import TorchRunner

        return TorchRunner.load(model, options)
    from ember.engine.runners.llamacpp.runner import LlamaCppRunner

    return LlamaCppRunner.load(model, options)


def decode_speed(runner: Any, ids: list[int], decode: int) -> float:
    """tok/s of one-token forwards over a cache holding len(ids) - decode tokens and growing."""
    from ember.engine.block_manager import BlockManager
    from ember.engine.perplexity import PerplexityResult, Scorer

    num_blocks = -(-len(ids) // 16) + 2
    runner.init_kv(num_blocks, 16)
    timed = TimedRunner(runner)
    scorer = Scorer(timed, BlockManager(num_blocks, 16, enable_prefix_cache=False), 16)
    scorer.score(ids, PerplexityResult(), chunk=1, score_from=len(ids) - decode)
    return 1.0 / statistics.median(timed.decode_s)


def measure(
    runner_name: str, model: Path, cache: str, ids: list[int], threads: int, decode: int
) -> Row:
    from ember.engine.perplexity import perplexity

    runner = _load(runner_name, model, cache, threads)
    try:
        start = time.perf_counter()
        result = perplexity(runner, ids, mode="windows", ctx=len(ids), bos_id=ids[0])
        seconds = time.perf_counter() - start
        tok_s = decode_speed(runner, ids, decode) if decode else float("nan")
        return Row(
            runner_name,
            cache,
            len(ids),
            result.ppl,
            runner.info.kv_bytes_per_token,
            tok_s,
            seconds,
        )
    finally:
        runner.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="gemma3-270m")
    parser.add_argument("--contexts", default="4096,16384")
    parser.add_argument("--runners", default="torch,llama.cpp")
    parser.add_argument("--caches", default="f16,q8,q4", help="--kv-cache types to measure")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--decode", type=int, default=32, help="one-token steps timed (0 = off)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    from ember.app.loading import resolve_files
    from ember.models.text.tokenizers.open import open_tokenizer

    model = resolve_files(args.model).path
    contexts = [int(c) for c in args.contexts.split(",")]
    runners = args.runners.split(",")
    wanted = args.caches.split(",")
    tokenizer = open_tokenizer(model)
    text, _, _ = build_corpus(tokenizer, max(contexts) + 16)
    all_ids = tokenizer.encode(text, add_bos=True)
    rows = []
    for ctx in contexts:
        for runner in runners:
            for cache in (c for c in CACHE_TYPES[runner] if c in wanted):
                row = measure(runner, model, cache, all_ids[:ctx], args.threads, args.decode)
                rows.append(row)
                if not args.json:
                    print(
                        f"{row.runner:>9} {row.cache:>3} ctx {row.context:>6}: ppl {row.ppl:.4f}"
                        f"  {row.kv_mib:.0f} MiB KV  decode {_speed(row)}"
                        f"  ({row.seconds:.0f} s)",
                        flush=True,
                    )
    if args.json:
        print(json.dumps([asdict(r) for r in rows]))
        return
    print_table(rows, runners, contexts)


def _speed(row: Row) -> str:
    """Decode tok/s, or "not timed" under --decode 0."""
    return "not timed" if math.isnan(row.decode_tok_s) else f"{row.decode_tok_s:.1f} tok/s"


def print_table(rows: list[Row], runners: list[str], contexts: list[int]) -> None:
    """Markdown: per runner and cache type, ppl (vs f16), KV MiB and decode tok/s per context."""
    head = " | ".join(f"ppl @ {c} | KV MiB @ {c} | decode @ {c}" for c in contexts)
    print(f"\n| runner | --kv-cache | bytes/token | {head} |")
    print("|---|---|---|" + "---|---|---|" * len(contexts))
    for runner in runners:
        mine = [r for r in rows if r.runner == runner]
        base = {r.context: r.ppl for r in mine if r.cache == "f16"}
        for cache in dict.fromkeys(r.cache for r in mine):
            cells = []
            for c in contexts:
                row = next((r for r in mine if r.cache == cache and r.context == c), None)
                if row is None:
                    cells.append("not run | | ")
                    continue
                cost = f" ({row.ppl / base[c] - 1:+.2%})" if c in base else ""
                cells.append(f"{row.ppl:.3f}{cost} | {row.kv_mib:.0f} | {_speed(row)}")
            nbytes = next(r.kv_bytes_per_token for r in mine if r.cache == cache)
            print(f"| {runner} | {cache} | {nbytes} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
