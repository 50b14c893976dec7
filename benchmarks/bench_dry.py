"""What DRY costs per token on the starter's 262,144-token vocabulary.

1. The sampler alone: sample_token with DRY off vs on, on histories of 512 / 2048 / 4096 tokens
   of real text (README.md) and of a degenerate loop, medians of --repeats calls.
2. Breaker compilation (once per tokenizer and breaker set).
3. Whole-engine decode tok/s with DRY off vs on, interleaved runs (--decode-runs), greedy.

    python benchmarks/bench_dry.py [--repeats 50] [--decode-runs 3] [--decode-tokens 64] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _median_us(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e6


def sampler_rows(tok: Any, repeats: int) -> list[dict[str, Any]]:
    from ember.engine.api import DRY_BREAKERS, SamplingParams
    from ember.engine.dry import breakers_for
    from ember.engine.sampling import sample_token

    text_ids = tok.encode((ROOT / "README.md").read_text() * 4)
    loop_ids = tok.encode("What is the capital of France? mendatang\n" * 600)
    breakers = breakers_for(tok, DRY_BREAKERS)
    rng = np.random.default_rng(0)
    logits = rng.standard_normal(tok.vocab_size).astype(np.float32)
    off = SamplingParams(temperature=0.7, top_k=40, top_p=0.95, min_p=0.05)
    on = SamplingParams(**{**off.__dict__, "dry_multiplier": 0.8})
    rows = []
    for name, ids in (("text", text_ids), ("loop", loop_ids)):
        for n in (512, 2048, 4096):
            history, gen = ids[:n], np.random.default_rng(1)
            t_off = _median_us(partial(sample_token, logits, off, history, gen), repeats)
            t_on = _median_us(partial(sample_token, logits, on, history, gen, breakers), repeats)
            rows.append(
                {
                    "history": name,
                    "tokens": n,
                    "off_us": round(t_off),
                    "on_us": round(t_on),
                    "dry_us": round(t_on - t_off),
                }
            )
    return rows


def decode_rows(model: str, runs: int, tokens: int) -> dict[str, Any]:
    from ember.app.loading import resolve_files
    from ember.engine.api import EngineOptions, Finished, GenerationRequest, SamplingParams
    from ember.engine.engine import Engine

    options = EngineOptions(model=model, runner="llama.cpp", threads=2, prefix_cache=False)
    engine = Engine.load(options, resolve_files(model))
    prompt = (ROOT / "README.md").read_text()[:3000]
    speeds: dict[str, list[float]] = {"off": [], "on": []}
    try:
        for _ in range(runs):
            for label, mult in (("off", 0.0), ("on", 0.8)):
                sampling = SamplingParams(
                    max_tokens=tokens, ignore_eos=True, loop_min_tokens=0, dry_multiplier=mult
                )
                request = GenerationRequest(prompt=prompt, sampling=sampling)
                final = next(e for e in engine.generate(request) if isinstance(e, Finished))
                speeds[label].append(final.stats.decode_tok_s)
    finally:
        engine.close()
    off, on = statistics.median(speeds["off"]), statistics.median(speeds["on"])
    return {
        "decode_tok_s_off": round(off, 2),
        "decode_tok_s_on": round(on, 2),
        "ratio": round(on / off, 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--decode-runs", type=int, default=3)
    parser.add_argument("--decode-tokens", type=int, default=64)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    from ember.engine.api import DRY_BREAKERS
    from ember.engine.dry import compile_breakers
    from ember.models.registry.starter import starter_path
    from ember.models.text.tokenizers.llamacpp import LlamaCppTokenizer

    model = str(starter_path(ROOT / "tests" / ".cache" / "models"))
    tok = LlamaCppTokenizer(model)
    started = time.perf_counter()
    compile_breakers(tok, DRY_BREAKERS)
    compile_s = time.perf_counter() - started
    result: dict[str, Any] = {
        "compile_breakers_s": round(compile_s, 2),
        "sampler": sampler_rows(tok, args.repeats),
    }
    if args.decode_runs:
        result["decode"] = decode_rows(model, args.decode_runs, args.decode_tokens)
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"breaker compilation: {result['compile_breakers_s']} s (once per tokenizer)")
    print(f"{'history':<8}{'tokens':>7}{'DRY off us':>12}{'DRY on us':>11}{'DRY cost us':>13}")
    for row in result["sampler"]:
        print(
            f"{row['history']:<8}{row['tokens']:>7}{row['off_us']:>12}{row['on_us']:>11}{row['dry_us']:>13}"
        )
    if "decode" in result:
        d = result["decode"]
        print(
            f"engine decode tok/s: off {d['decode_tok_s_off']}, on {d['decode_tok_s_on']} (on/off {d['ratio']})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
