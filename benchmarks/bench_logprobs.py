"""Decode tok/s with and without logprobs on one loaded engine, side by side.

One Engine (the starter model by default) serves three kinds of greedy request, alternating
(off, logprobs, logprobs + top_logprobs=20, off, ...) so machine load hits them alike; every
request generates exactly --max-tokens tokens (ignore_eos), so only the scoring differs. The
scoring cost per token (engine/logprobs.py: log-softmax of the row, top-k) is timed inside the
engine by wrapping score_rows. Medians are printed; the first round warms up and is not counted.

    python benchmarks/bench_logprobs.py [--model PATH] [--runner llama.cpp|torch]
        [--max-tokens 64] [--rounds 5] [--threads 2] [--json]
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.engine_bench import engine_parser, load_engine, time_calls  # noqa: E402

PROMPT = "Write a long story about a lighthouse keeper who finds a map."
KINDS = {"off": (False, 0), "logprobs": (True, 0), "top20": (True, 20)}


def main() -> None:
    args = engine_parser(__doc__).parse_args()
    from ember.engine import engine as engine_module
    from ember.engine.api import ChatMessage, Finished, GenerationRequest, SamplingParams

    costs: list[float] = []
    time_calls(engine_module, ("score_rows",), costs)  # the engine's scoring, per call
    engine = load_engine(args)
    rates: dict[str, list[float]] = {kind: [] for kind in KINDS}
    per_token: dict[str, list[float]] = {kind: [] for kind in KINDS}
    for round_index in range(args.rounds + 1):
        for kind, (logprobs, top) in KINDS.items():
            costs.clear()
            sampling = SamplingParams(
                max_tokens=args.max_tokens, ignore_eos=True, logprobs=logprobs, top_logprobs=top
            )
            request = GenerationRequest(messages=(ChatMessage("user", PROMPT),), sampling=sampling)
            final = [e for e in engine.generate(request) if isinstance(e, Finished)][-1]
            if round_index == 0:
                continue  # warm-up: the prefix cache, the page cache
            rates[kind].append(final.stats.decode_tok_s)
            per_token[kind].append(sum(costs) / max(1, final.stats.generated_tokens))
    engine.close()
    off = statistics.median(rates["off"])
    result: dict[str, Any] = {
        "model": Path(args.model).name,
        "runner": args.runner,
        "rounds": args.rounds,
        "tokens": args.max_tokens,
    }
    for kind in KINDS:
        rate = statistics.median(rates[kind])
        result[kind] = {
            "tok_s": rate,
            "ratio": rate / off if off else 0.0,
            "score_ms_per_token": 1000 * statistics.median(per_token[kind]),
        }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{result['model']} on {args.runner}, {args.threads} threads, medians of {args.rounds}")
    for kind in KINDS:
        row = result[kind]
        print(
            f"  {kind:9} {row['tok_s']:7.2f} tok/s  {row['ratio']:6.3f}x  "
            f"scoring {row['score_ms_per_token']:6.3f} ms/token"
        )


if __name__ == "__main__":
    main()
