"""benchmarks/bench_peers.py runs its side-by-side table on a tiny GGUF (numbers not checked)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_peers.py"


def test_peers_table_on_a_tiny_model(tiny_models: Any) -> None:
    cmd = [
        sys.executable, str(SCRIPT), str(tiny_models.gguf("gemma3", "Q8_0")),
        "--runners", "torch,llama.cpp runner,llama.cpp", "--repeats", "1",
        "--prompt-tokens", "16", "--decode-tokens", "4", "--threads", "1", "--json",
    ]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    table = json.loads(out.stdout.strip().splitlines()[-1])
    assert not table["failed"]
    assert set(table["medians"]) == {"torch", "llama.cpp runner", "llama.cpp"}
    for m in table["medians"].values():
        assert m["prefill_tok_s"] > 0 and m["decode_tok_s"] > 0 and m["peak_rss_mb"] > 0


def test_a_missing_peer_is_skipped_with_its_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = importlib.util.spec_from_file_location("bench_peers", SCRIPT)
    assert spec is not None and spec.loader is not None
    bench_peers: Any = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench_peers)
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name: None if name == "mistralrs" else real(name)
    )
    runners, skipped = bench_peers.available(["torch", "mistral.rs"])
    assert runners == ["torch"] and "not installed" in skipped["mistral.rs"]
    assert "mistral.rs: skipped: not installed" in bench_peers.format_peers(
        {"medians": {}, "failed": {}, "skipped": skipped}
    )


def test_unknown_runner_is_refused() -> None:
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--runners", "torch,vllm"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 2 and "--runners: unknown vllm" in out.stderr
