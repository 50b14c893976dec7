"""Constrained vs unconstrained decoding on one loaded engine: decode tok/s side by side.

One Engine (the starter model by default) serves both kinds of request, alternating
(plain, constrained, plain, ...) so machine load hits both alike. The constrained request asks
for JSON with one long string field, so both generate about the same number of tokens. The
mask cost per token (computing the allowed set, masking the logits, advancing the grammar) is
timed inside the engine by wrapping the Constraint's methods. Medians are printed; the first
round warms the vocabulary index and is not counted.

    python benchmarks/bench_constraint.py [--model PATH] [--runner llama.cpp|torch]
        [--max-tokens 64] [--rounds 5] [--threads 2] [--json]
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.engine_bench import engine_parser, load_engine, time_calls  # noqa: E402

SCHEMA = {
    "type": "object",
    "properties": {"title": {"type": "string"}, "story": {"type": "string"}},
    "required": ["title", "story"],
    "additionalProperties": False,
}
PROMPT = "Write a long story about a lighthouse keeper who finds a map, as JSON."


def main() -> None:
    args = engine_parser(__doc__).parse_args()
    from ember.engine import constraint as constraint_module
    from ember.engine.api import (
        ChatMessage,
        ConstraintSpec,
        Finished,
        GenerationRequest,
        SamplingParams,
    )

    costs: list[float] = []
    # the mask's cost per call: computing the allowed set and masking, advancing the grammar
    time_calls(constraint_module.Constraint, ("apply", "advance"), costs)
    engine = load_engine(args)
    spec = ConstraintSpec("json_schema", json.dumps(SCHEMA))
    sampling = SamplingParams(temperature=0.0, max_tokens=args.max_tokens)
    rates: dict[str, list[float]] = {"plain": [], "constrained": []}
    tokens: dict[str, list[int]] = {"plain": [], "constrained": []}
    per_token: list[float] = []
    for round_index in range(args.rounds + 1):
        for kind in ("plain", "constrained"):
            costs.clear()
            request = GenerationRequest(
                messages=(ChatMessage("user", PROMPT),),
                sampling=sampling,
                constraint=spec if kind == "constrained" else None,
            )
            final = [e for e in engine.generate(request) if isinstance(e, Finished)][-1]
            if round_index == 0:
                continue  # warm-up: the vocabulary index, the prefix cache, the page cache
            rates[kind].append(final.stats.decode_tok_s)
            tokens[kind].append(final.stats.generated_tokens)
            if kind == "constrained" and final.stats.generated_tokens:
                per_token.append(sum(costs) / final.stats.generated_tokens)
    engine.close()
    plain, constrained = statistics.median(rates["plain"]), statistics.median(rates["constrained"])
    result = {
        "model": Path(args.model).name,
        "runner": args.runner,
        "rounds": args.rounds,
        "plain_tok_s": plain,
        "constrained_tok_s": constrained,
        "ratio": constrained / plain if plain else 0.0,
        "mask_ms_per_token": 1000 * statistics.median(per_token) if per_token else 0.0,
        "tokens": {k: statistics.median(v) for k, v in tokens.items()},
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{result['model']} on {args.runner}, {args.threads} threads, medians of {args.rounds}")
    print(f"  plain        {plain:7.2f} tok/s ({result['tokens']['plain']:.0f} tokens)")
    print(f"  constrained  {constrained:7.2f} tok/s ({result['tokens']['constrained']:.0f} tokens)")
    print(f"  ratio        {result['ratio']:7.3f}x")
    print(f"  mask cost    {result['mask_ms_per_token']:7.3f} ms per token")


if __name__ == "__main__":
    main()
