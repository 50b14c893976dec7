"""benchmarks/bench_moe_rss.py on a small MoE file: every stage reported, the chosen experts
counted, and a dense model refused by name."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.quick_gguf import write_tiny_gguf

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_moe_rss.py"
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="smaps is Linux's")


def _run(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, str(SCRIPT), str(path), "--threads", "1", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("warm", [False, True])
def test_stages_and_experts(tmp_path: Path, warm: bool) -> None:
    path = write_tiny_gguf(tmp_path / "moe.gguf", "qwen3moe", experts=(8, 2, 512))
    out = _run(path, "--prompt-tokens", "1", "--decode", "3", *(["--warm"] if warm else []))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("moe.gguf: ")
    first = "read into the page cache" if warm else "dropped from the page cache"
    assert lines[2].startswith(first)
    loaded, prefill, decoded = (line.split() for line in lines[3:6])
    assert loaded[:4] == ["loaded", "0", "of", "16"]  # 2 layers x 8 experts
    assert prefill[:2] == ["1-token", "prefill"] and prefill[2:5] == ["4", "of", "16"]
    assert decoded[:4] == ["+", "3", "decoded", "tokens"] and 4 <= int(decoded[4]) <= 16


def test_a_dense_model_is_refused(tmp_path: Path) -> None:
    out = _run(write_tiny_gguf(tmp_path / "dense.gguf", "llama"))
    assert out.returncode == 2 and "not a mixture-of-experts model" in out.stderr
