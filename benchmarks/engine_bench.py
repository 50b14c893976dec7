"""What the one-engine benchmarks share (bench_constraint.py, bench_logprobs.py): their flags,
the engine they load (the starter model unless --model), and timing calls to an engine part.

    parser = engine_parser(__doc__)
    args = parser.parse_args()
    engine = load_engine(args)
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

if TYPE_CHECKING:
    from ember.engine.engine import Engine


def engine_parser(doc: str | None) -> argparse.ArgumentParser:
    """--model, --runner, --max-tokens, --rounds, --threads, --json; a script adds its own."""
    parser = argparse.ArgumentParser(description=(doc or "").split("\n")[0])
    parser.add_argument("--model", default=None, help="a .gguf path (default: the starter)")
    parser.add_argument("--runner", default="llama.cpp")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    return parser


def load_engine(args: argparse.Namespace) -> Engine:
    """One Engine on args.model (filled in with the starter's path when None), ctx 1024, no
    disk prefix store, so every round computes what it measures."""
    from ember.app.loading import resolve_files
    from ember.engine.api import EngineOptions
    from ember.engine.engine import Engine

    if args.model is None:
        from ember.models.registry.starter import starter_path

        args.model = str(starter_path(ROOT / "tests" / ".cache" / "models"))
    options = EngineOptions(
        model=args.model, runner=args.runner, threads=args.threads, ctx=1024, prefix_disk_bytes=0
    )
    return Engine.load(options, resolve_files(args.model))


def time_calls(owner: Any, names: tuple[str, ...], costs: list[float]) -> None:
    """Replace owner's attributes `names` (functions or methods) with wrappers that append
    each call's duration in seconds to costs."""
    for name in names:
        original: Callable[..., Any] = getattr(owner, name)

        def wrapper(*args: Any, _original: Callable[..., Any] = original) -> Any:
            started = time.perf_counter()
            try:
                return _original(*args)
            finally:
                costs.append(time.perf_counter() - started)

        setattr(owner, name, wrapper)
