"""Side-by-side speed and memory of Ember's torch runner, Ember's llama.cpp runner and raw
llama-cpp-python on one GGUF, alternating, in fresh processes (bench_child.py), medians.

Speed ratios compare the torch runner with raw llama-cpp-python (llama.cpp's own loop); the
memory ratio compares it with Ember's llama.cpp runner (the same engine around either runner).
The torch runner starts with its caches filled (the compiled native kernels, or the packed
weights on the torch-kernel path); "torch, 1st run" starts with empty ones.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ember.engine.api import ModelFiles

RUNNERS = ("torch", "llama.cpp runner", "llama.cpp", "torch kernels")
FIRST_RUN = "torch, 1st run"  # torch with empty caches (kernels compiled, or weights packed)
MEMORY_REFERENCE = "llama.cpp runner"


@dataclass
class BenchResult:
    """One run of one runner."""

    runner: str
    load_s: float  # process start -> model ready (imports included)
    first_token_s: float  # process start -> first generated token (cold start)
    prefill_tok_s: float
    decode_tok_s: float
    peak_rss_mb: float
    base_rss_mb: float = 0.0  # RSS after importing the runtime, before loading the model

    @property
    def model_rss_mb(self) -> float:
        """Peak RSS beyond the runtime's own."""
        return self.peak_rss_mb - self.base_rss_mb


def run_once(
    runner: str,
    model: ModelFiles,
    threads: int,
    prompt_len: int,
    decode_len: int,
    packed_cache: str = "",
    timeout_s: float | None = None,
) -> BenchResult:
    """One measurement of runner in a fresh Python process (packed_cache: the packed-weight
    folder of the torch runner; "" = none). A child past timeout_s is killed (RuntimeError)."""
    import ember

    root = str(Path(ember.__file__).resolve().parent.parent)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])),
    }
    code = "import sys; from ember.engine.runners.torch.bench_child import child_main; child_main(sys.argv[1:])"
    args = [
        sys.executable,
        "-c",
        code,
        runner,
        str(model.path),
        str(threads),
        str(prompt_len),
        str(decode_len),
        packed_cache,
        model.digest,
    ]
    try:
        proc = subprocess.run(
            args, capture_output=True, text=True, env=env, check=False, timeout=timeout_s
        )
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"bench {runner}: no result within {timeout_s:.0f} s") from exc
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"bench {runner} failed: {tail}")
    return BenchResult(**json.loads(lines[-1]))


@dataclass
class BenchTable:
    """Medians per runner over repetitions."""

    model: str
    threads: int
    repeats: int
    prompt_tokens: int
    decode_tokens: int
    gguf_mb: float
    medians: dict[str, dict[str, float]]

    def ratios(self) -> dict[str, float]:
        """torch / raw llama.cpp per metric, except memory: torch / Ember's llama.cpp runner."""
        speed = self.ratio("torch")
        memory = self.ratio("torch", MEMORY_REFERENCE)
        return {
            **speed,
            "peak_rss_mb": memory["peak_rss_mb"],
            "model_rss_mb": memory["model_rss_mb"],
        }

    def ratio(self, runner: str, reference: str = "llama.cpp") -> dict[str, float]:
        """runner / reference per metric."""
        a, b = self.medians[runner], self.medians[reference]
        return {k: a[k] / b[k] if b[k] else float("nan") for k in a}


def run_bench(
    model: ModelFiles, threads: int, repeats: int, prompt_len: int = 512, decode_len: int = 256
) -> BenchTable:
    """Alternate the runners repeats times; medians of every metric."""
    import tempfile

    results: dict[str, list[BenchResult]] = {r: [] for r in (*RUNNERS, FIRST_RUN)}
    with tempfile.TemporaryDirectory(prefix="ember-bench-") as tmp:
        cache = str(Path(tmp) / "packed")
        run_once("torch", model, threads, 16, 4, cache)  # compiles the native kernels
        run_once("torch kernels", model, threads, 16, 4, cache)  # fills the packed cache
        for i in range(repeats):
            for runner in RUNNERS:
                results[runner].append(
                    run_once(runner, model, threads, prompt_len, decode_len, cache)
                )
            empty = str(Path(tmp) / f"empty{i}")
            first = run_once("torch", model, threads, prompt_len, decode_len, empty)
            results[FIRST_RUN].append(first)
    keys = ("load_s", "first_token_s", "prefill_tok_s", "decode_tok_s", "peak_rss_mb")
    medians = {
        r: {
            **{k: statistics.median(getattr(x, k) for x in rs) for k in keys},
            "model_rss_mb": statistics.median(x.model_rss_mb for x in rs),
        }
        for r, rs in results.items()
    }
    size_mb = model.path.stat().st_size / 2**20
    return BenchTable(str(model.path), threads, repeats, prompt_len, decode_len, size_mb, medians)


def format_table(t: BenchTable) -> str:
    """The human-readable table with the ratio column."""
    rows = [
        ("load (s)", "load_s", "{:.2f}"),
        ("first token, cold (s)", "first_token_s", "{:.2f}"),
        (f"prefill tok/s ({t.prompt_tokens} tokens)", "prefill_tok_s", "{:.1f}"),
        (f"decode tok/s ({t.decode_tokens} tokens)", "decode_tok_s", "{:.1f}"),
        ("peak RSS (MiB)", "peak_rss_mb", "{:.0f}"),
        ("model RSS (MiB, - runtime)", "model_rss_mb", "{:.0f}"),
    ]
    ratios, first = t.ratios(), t.medians[FIRST_RUN]
    head = ("torch", "llama.cpp runner", "llama.cpp")
    lines = [
        f"{Path(t.model).name}: {t.gguf_mb:.0f} MiB, {t.threads} threads, median of {t.repeats}",
        f"{'metric':<28}{'torch':>9}{'Ember llama':>13}{'raw llama':>11}{'ratio':>8}"
        f"{'1st run':>9}{'torch kernels':>15}",
    ]
    for label, key, fmt in rows:
        a, b, c = (t.medians[r][key] for r in head)
        lines.append(
            f"{label:<28}{fmt.format(a):>9}{fmt.format(b):>13}{fmt.format(c):>11}"
            f"{ratios[key]:>7.2f}x{fmt.format(first[key]):>9}"
            f"{fmt.format(t.medians['torch kernels'][key]):>15}"
        )
    lines.append(
        "ratio: torch / raw llama-cpp-python, memory rows torch / Ember's llama.cpp runner; "
        "1st run: torch with empty caches; torch kernels: the fallback without a C compiler"
    )
    return "\n".join(lines)
