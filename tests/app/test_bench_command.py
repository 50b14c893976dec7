"""`ember bench` runs both comparisons on a real GGUF (a tiny one: the numbers are not checked)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any


def test_bench_json_has_both_tables(tiny_models: Any) -> None:
    path = tiny_models.gguf("gemma3", "Q8_0")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "ember",
            "bench",
            str(path),
            "--repeats",
            "1",
            "--prompt-tokens",
            "32",
            "--decode-tokens",
            "8",
            "--threads",
            "1",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    for runner in ("torch", "llama.cpp runner", "llama.cpp", "torch, 1st run", "torch kernels"):
        assert result["medians"][runner]["decode_tok_s"] > 0
        assert result["medians"][runner]["peak_rss_mb"] > 0
    overhead = result["llamacpp_runner"]
    assert overhead["prefill_ratio"] > 0 and overhead["decode_ratio"] > 0
    assert overhead["decode_tokens"] == 8
