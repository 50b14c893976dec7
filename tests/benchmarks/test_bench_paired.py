"""benchmarks/bench_paired.py runs both engines in one process on a tiny GGUF (numbers not
checked, only that every round measured both)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from ember.engine.runners.torch.native.isa import choose

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_paired.py"


def test_paired_rounds_on_a_tiny_model(tiny_models: Any) -> None:
    cmd = [
        sys.executable, str(SCRIPT), str(tiny_models.gguf("gemma3", "Q8_0")), "--rounds", "3",
        "--burst", "2", "--prompt-tokens", "16", "--threads", "1", "--json",
    ]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    table = json.loads(out.stdout.strip().splitlines()[-1])
    metrics = [row["metric"] for row in table["rows"]]
    assert metrics == ["prefill tok/s (16 tokens)", "decode tok/s (bursts of 2)"]
    # every figure names its machine: the native ISA Ember ran and llama.cpp's build
    assert f"Ember native ISA {choose().name}" in table["machine"], table["machine"]
    assert "llama.cpp built for " in table["machine"] and "unknown features" not in table["machine"]
    for row in table["rows"]:
        assert len(row["ratios"]) == 3 and all(r > 0 for r in row["ratios"])
        assert row["ours_tok_s"] > 0 and row["llama_tok_s"] > 0
        assert min(row["ratios"]) <= row["ratio"] <= max(row["ratios"])


def test_a_bad_count_is_refused_by_name() -> None:
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--rounds", "0"], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 2 and "--rounds: must be at least 1 (got 0)" in out.stderr


def test_the_whole_engine_side_on_the_cpu_clock(tiny_models: Any) -> None:
    """--ours engine: Ember's engine steps (default sampling) against raw llama.cpp, timed in
    CPU time."""
    cmd = [
        sys.executable, str(SCRIPT), str(tiny_models.gguf("gemma3", "Q8_0")), "--ours", "engine",
        "--sampling", "defaults", "--clock", "cpu", "--rounds", "2", "--burst", "2",
        "--prompt-tokens", "16", "--threads", "1", "--json",
    ]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    table = json.loads(out.stdout.strip().splitlines()[-1])
    assert table["clock"] == "cpu" and table["ours"] == "engine (llama.cpp, defaults)"
    for row in table["rows"]:
        assert len(row["ratios"]) == 2 and row["ours_tok_s"] > 0 and row["llama_tok_s"] > 0


def test_the_cpu_clock_needs_one_thread() -> None:
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--clock", "cpu", "--threads", "2"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 2 and "--clock cpu: needs --threads 1" in out.stderr
