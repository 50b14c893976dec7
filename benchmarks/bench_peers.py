"""Ember's two runners against its peers on one GGUF, side by side in one run.

Usage: python benchmarks/bench_peers.py [GGUF] [--threads N] [--repeats R]
       [--prompt-tokens P] [--decode-tokens D] [--runners a,b,...] [--timeout S] [--json]

Runners: Ember's torch runner ("torch"), Ember's llama.cpp runner ("llama.cpp runner"), raw
llama-cpp-python ("llama.cpp", the reference: `Llama.eval` and its logits) and mistral.rs
("mistral.rs", its PyPI wheel; skipped with the reason when it is not installed). Each run is a
fresh process (engine/runners/torch/bench_child.py, the same children as `ember bench`); the
runners alternate within every repeat, and the table shows medians: prefill and greedy decode
tok/s and peak RSS, with ratios against raw llama-cpp-python. Default GGUF: the starter model.

mistral.rs takes text, so its prompt is a sentence repeated to about P tokens, and its speeds
are its own usage counters (the others are timed around their calls).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

RUNNERS = ("torch", "llama.cpp runner", "llama.cpp", "mistral.rs")
REFERENCE = "llama.cpp"
METRICS = ("load_s", "prefill_tok_s", "decode_tok_s", "peak_rss_mb")


def available(runners: list[str]) -> tuple[list[str], dict[str, str]]:
    """The runners that can run here, and why each other one cannot."""
    skipped = {}
    if "mistral.rs" in runners and importlib.util.find_spec("mistralrs") is None:
        skipped["mistral.rs"] = "not installed (pip install mistralrs: a CPU wheel on PyPI)"
    return [r for r in runners if r not in skipped], skipped


def run_peers(
    model: Any,
    runners: list[str],
    threads: int,
    repeats: int,
    prompt: int,
    decode: int,
    timeout_s: float,
) -> dict[str, Any]:
    """Alternate the runners repeats times (fresh processes); medians per runner."""
    from ember.engine.runners.torch.bench import run_once

    results: dict[str, list[Any]] = {r: [] for r in runners}
    failed: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="ember-peers-") as tmp:
        cache = str(Path(tmp) / "packed")
        if "torch" in runners:  # compiles the native kernels outside the timed runs
            run_once("torch", model, threads, 16, 4, cache, timeout_s)
        for _ in range(repeats):
            for r in runners:
                if r in failed:
                    continue
                try:
                    results[r].append(run_once(r, model, threads, prompt, decode, cache, timeout_s))
                except RuntimeError as exc:
                    failed[r] = str(exc)
    medians = {
        r: {k: statistics.median(getattr(x, k) for x in rs) for k in METRICS}
        for r, rs in results.items()
        if rs
    }
    return {"medians": medians, "failed": failed}


def format_peers(table: dict[str, Any]) -> str:
    medians, ref = table["medians"], table["medians"].get(REFERENCE)
    head = (
        f"{'runner':<18}{'load s':>8}{'prefill tok/s':>15}{'decode tok/s':>14}{'peak RSS MiB':>14}"
    )
    lines = [head + ("   ratios vs raw llama.cpp: prefill / decode / RSS" if ref else "")]
    for r, m in medians.items():
        row = (
            f"{r:<18}{m['load_s']:>8.2f}{m['prefill_tok_s']:>15.1f}{m['decode_tok_s']:>14.1f}"
            f"{m['peak_rss_mb']:>14.0f}"
        )
        if ref:
            ratios = [m[k] / ref[k] for k in ("prefill_tok_s", "decode_tok_s", "peak_rss_mb")]
            row += "   " + " / ".join(f"{x:.2f}x" for x in ratios)
        lines.append(row)
    for r, why in {**table.get("skipped", {}), **table["failed"]}.items():
        lines.append(f"{r}: skipped: {why}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    from ember.app.loading import resolve_files
    from ember.models.registry.starter import starter_path

    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("gguf", nargs="?")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--decode-tokens", type=int, default=256)
    ap.add_argument("--runners", default=",".join(RUNNERS))
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per child process")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    wanted = [r.strip() for r in args.runners.split(",") if r.strip()]
    unknown = [r for r in wanted if r not in RUNNERS]
    if unknown:
        ap.error(f"--runners: unknown {', '.join(unknown)} (have {', '.join(RUNNERS)})")
    root = Path(__file__).resolve().parent.parent
    path = Path(args.gguf) if args.gguf else starter_path(root / "tests" / ".cache" / "models")
    runners, skipped = available(wanted)
    for r, why in skipped.items():
        print(f"{r}: skipped: {why}", file=sys.stderr)
    table = run_peers(
        resolve_files(str(path)),
        runners,
        args.threads,
        args.repeats,
        args.prompt_tokens,
        args.decode_tokens,
        args.timeout,
    )
    table.update(skipped=skipped, threads=args.threads, repeats=args.repeats, model=str(path))
    print(json.dumps(table) if args.json else format_peers(table))


if __name__ == "__main__":
    main()
