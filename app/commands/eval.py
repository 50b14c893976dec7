"""`ember eval ppl MODEL FILE`: perplexity of a text file through Ember's engine.

Modes (see engine/perplexity.py): `windows` (default; independent windows of --ctx tokens, each
opened by BOS), `streaming` (one pass with --sink/--window eviction, the StreamingLLM protocol;
the default when --window is given), `recompute` (sliding window of --window tokens recomputed
every --stride tokens: the paper's baseline). Window attention without sinks is
`--mode streaming --sink 0`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

NAME = "eval"
HELP = "Evaluate a model: `ember eval ppl MODEL FILE` prints the perplexity of a text file."
ORDER = 60


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="eval_command", metavar="WHAT", required=True)
    ppl = sub.add_parser("ppl", help="perplexity of a text file", description=__doc__)
    ppl.add_argument("model", help="a registry name or alias, a .gguf file or a safetensors folder")
    ppl.add_argument("file", type=Path, help="a UTF-8 text file")
    ppl.add_argument("--runner", help="torch | llama.cpp | auto (default: settings)")
    ppl.add_argument("--device", choices=("auto", "cpu", "cuda", "mps"))
    ppl.add_argument("--threads", type=int, help="CPU threads (0 = auto: the cores free now)")
    ppl.add_argument(
        "--ctx", type=int, default=512, help="window length of the windows mode (default 512)"
    )
    ppl.add_argument("--mode", choices=("windows", "streaming", "recompute"))
    ppl.add_argument(
        "--sink", type=int, default=4, help="sink tokens (streaming; default 4, 0 = none)"
    )
    ppl.add_argument(
        "--window", type=int, default=0, help="recent tokens kept (streaming/recompute)"
    )
    ppl.add_argument(
        "--chunk", type=int, default=1, help="streaming: tokens fed per forward (1 = exact)"
    )
    ppl.add_argument(
        "--stride", type=int, default=1, help="recompute: tokens scored per recompute (1 = exact)"
    )
    ppl.add_argument(
        "--max-tokens", type=int, default=0, help="score only the first N tokens (0 = all)"
    )
    ppl.add_argument("--json", action="store_true", help="print one JSON object")


def _check(args: argparse.Namespace) -> None:
    """The evaluation's own flags, by the same rules as every flag (app/rules.py)."""
    from ember.app.rules import check_flag

    for flag, value, rule in (
        ("--ctx", args.ctx, "ctx"),
        ("--sink", args.sink, "sink"),
        ("--window", args.window, "window"),
        ("--chunk", args.chunk, "chunk"),
        ("--stride", args.stride, "stride"),
        ("--max-tokens", args.max_tokens, "score_tokens"),
    ):
        check_flag(flag, value, rule)


def run(args: argparse.Namespace) -> int:
    from ember.app.loading import load_runner
    from ember.app.options import EngineFlags, engine_options
    from ember.engine.errors import EngineError
    from ember.engine.perplexity import perplexity

    _check(args)
    flags = EngineFlags(runner=args.runner, device=args.device, threads=args.threads, ctx=args.ctx)
    options = engine_options(args.model, flags=flags)
    try:
        text = args.file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise EngineError(f"{args.file}: cannot read as UTF-8 text ({exc})") from None
    mode = args.mode or ("streaming" if args.window > 0 else "windows")
    runner, _, name = load_runner(options)
    try:
        tokenizer = runner.tokenizer
        ids = tokenizer.encode(text, add_bos=tokenizer.add_bos)
        if args.max_tokens:
            ids = ids[: args.max_tokens]
        started = time.perf_counter()
        result = perplexity(
            runner,
            ids,
            mode=mode,
            ctx=args.ctx,
            sink=args.sink,
            window=args.window,
            chunk=args.chunk,
            stride=args.stride,
            bos_id=tokenizer.bos_id if tokenizer.add_bos else None,
        )
        seconds = time.perf_counter() - started
    finally:
        runner.close()
    record: dict[str, Any] = {
        "ppl": result.ppl,
        "tokens": result.tokens,
        "mode": mode,
        "model": name,
        "runner": runner.info.name,
        "ctx": args.ctx,
        "sink": args.sink if mode == "streaming" else 0,
        "window": args.window if mode != "windows" else 0,
        "evicted_tokens": result.evicted_tokens,
        "seconds": round(seconds, 3),
    }
    if args.json:
        print(json.dumps(record))
    else:
        detail = (
            f"{mode}, ctx {args.ctx}"
            if mode == "windows"
            else f"{mode}, sink {record['sink']}, window {args.window}"
        )
        print(
            f"perplexity {result.ppl:.4f} over {result.tokens} tokens ({detail}; {seconds:.1f} s)"
        )
    sys.stdout.flush()
    return 0
