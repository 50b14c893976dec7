"""`ember bench [MODEL] [--json]`: the torch runner and llama.cpp side by side on one GGUF, then
Ember's llama.cpp runner against raw llama-cpp-python (its overhead per token)."""

from __future__ import annotations

import argparse

NAME = "bench"
HELP = (
    "compare the torch runner with llama.cpp (load, prefill, decode, peak memory) and Ember's "
    "llama.cpp runner with raw llama-cpp-python"
)
ORDER = 80


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "model",
        nargs="?",
        default="gemma3-270m",
        help="model name or .gguf path (default: the starter)",
    )
    parser.add_argument(
        "--threads", type=int, help="threads for both runners (default: settings; 0 = auto)"
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="runs per runner; the table shows medians"
    )
    parser.add_argument("--prompt-tokens", type=int, default=512)
    parser.add_argument("--decode-tokens", type=int, default=256)
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object instead of the table"
    )


def run(args: argparse.Namespace) -> int:
    import json
    import os
    from dataclasses import asdict

    from ember.app.loading import resolve_files
    from ember.app.options import EngineFlags, engine_options
    from ember.app.rules import check_flag
    from ember.engine.errors import EngineError
    from ember.engine.runners.torch.bench import format_table, run_bench

    for flag, value, rule in (
        ("--repeats", args.repeats, "stride"),
        ("--prompt-tokens", args.prompt_tokens, "max_tokens"),
        ("--decode-tokens", args.decode_tokens, "max_tokens"),
    ):
        check_flag(flag, value, rule)
    options = engine_options(args.model, flags=EngineFlags(threads=args.threads))
    model = resolve_files(args.model)
    if model.format != "gguf":
        raise EngineError(f"{args.model}: bench compares against llama.cpp and needs a GGUF model")
    threads = options.threads or os.cpu_count() or 1
    from ember.engine.runners.llamacpp.bench import bench_llamacpp_runner

    try:
        table = run_bench(model, threads, args.repeats, args.prompt_tokens, args.decode_tokens)
    except RuntimeError as exc:
        raise EngineError(str(exc)) from None
    overhead = bench_llamacpp_runner(
        model,
        threads,
        prompt_tokens=args.prompt_tokens,
        decode_tokens=args.decode_tokens,
        repeats=args.repeats,
        with_engine=False,
    )
    if args.json:
        print(json.dumps({**asdict(table), "ratios": table.ratios(), "llamacpp_runner": overhead}))
    else:
        print(format_table(table))
        print()
        print(_overhead_table(overhead))
    return 0


def _overhead_table(result: dict[str, float]) -> str:
    """Ember's llama.cpp runner vs raw llama-cpp-python (target >= 0.95x)."""
    lines = [f"{'llama.cpp runner':<28}{'raw':>10}{'Ember':>12}{'ratio':>8}"]
    for label, key in (("prefill tok/s", "prefill"), ("decode tok/s", "decode")):
        raw, ours = result[f"raw_{key}_tok_s"], result[f"ember_{key}_tok_s"]
        lines.append(f"{label:<28}{raw:>10.1f}{ours:>12.1f}{ours / raw:>7.2f}x")
    return "\n".join(lines)
