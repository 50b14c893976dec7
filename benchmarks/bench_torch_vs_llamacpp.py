"""Torch runner vs llama-cpp-python on the same GGUF: medians of fresh-process runs.

Usage: python benchmarks/bench_torch_vs_llamacpp.py [GGUF] [--threads N] [--repeats R] [--json]
(default GGUF: the starter model). Same numbers as `ember bench`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    from ember.app.loading import resolve_files
    from ember.engine.runners.torch.bench import format_table, run_bench
    from ember.models.registry.starter import starter_path

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("gguf", nargs="?")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--decode-tokens", type=int, default=256)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    root = Path(__file__).resolve().parent.parent
    path = Path(args.gguf) if args.gguf else starter_path(root / "tests" / ".cache" / "models")
    table = run_bench(
        resolve_files(str(path)), args.threads, args.repeats, args.prompt_tokens, args.decode_tokens
    )
    print(
        json.dumps({**asdict(table), "ratios": table.ratios()})
        if args.json
        else format_table(table)
    )


if __name__ == "__main__":
    main()
