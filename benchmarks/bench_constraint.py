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

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SCHEMA = {
    "type": "object",
    "properties": {"title": {"type": "string"}, "story": {"type": "string"}},
    "required": ["title", "story"],
    "additionalProperties": False,
}
PROMPT = "Write a long story about a lighthouse keeper who finds a map, as JSON."


def _timed(engine_module: Any, costs: list[float]) -> None:
    """Wrap Constraint.apply and .advance so every call's time lands in costs (seconds)."""
    cls = engine_module.Constraint
    for name in ("apply", "advance"):
        original = getattr(cls, name)

        def wrapper(self: Any, *args: Any, _original: Any = original) -> Any:
            started = time.perf_counter()
            try:
                return _original(self, *args)
            finally:
                costs.append(time.perf_counter() - started)

        setattr(cls, name, wrapper)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=None)
    parser.add_argument("--runner", default="llama.cpp")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.model is None:
        from ember.models.registry.starter import starter_path

        args.model = str(starter_path(ROOT / "tests" / ".cache" / "models"))
    from ember.app.loading import resolve_files
    from ember.engine import constraint as constraint_module
    from ember.engine.api import (
        ChatMessage,
        ConstraintSpec,
        EngineOptions,
        Finished,
        GenerationRequest,
        SamplingParams,
    )
    from ember.engine.engine import Engine

    costs: list[float] = []
    _timed(constraint_module, costs)
    options = EngineOptions(
        model=args.model, runner=args.runner, threads=args.threads, ctx=1024, prefix_disk_bytes=0
    )
    engine = Engine.load(options, resolve_files(args.model))
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
