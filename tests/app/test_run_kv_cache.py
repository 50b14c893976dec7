"""`ember run --kv-cache` and `--ctx auto` on the starter model, both runners: a reply, and the
KV cache the engine reports (EngineInfo.kv_cache_bytes, in `--json`) shrinks with q8."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.model


def _run(model: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "ember", "run", str(model), "Name a color.", "--temperature"]
    argv += ["0", "--max-tokens", "8", "--threads", "2", "--draft", "none", "--json", *flags]
    return subprocess.run(argv, capture_output=True, text=True, timeout=600)


def _record(out: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert out.returncode == 0, out.stderr
    record: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    assert record["text"].strip() and record["generated_tokens"] > 0
    return record


@pytest.mark.parametrize(("runner", "q8_type"), [("torch", "int8"), ("llama.cpp", "q8_0")])
def test_q8_replies_and_its_cache_is_about_half(
    starter_gguf: Path, runner: str, q8_type: str
) -> None:
    f16 = _record(_run(starter_gguf, "--runner", runner, "--ctx", "2048"))
    q8 = _record(_run(starter_gguf, "--runner", runner, "--ctx", "2048", "--kv-cache", "q8"))
    assert (q8["kv_cache"], f16["kv_cache"]) == ("q8", "f16")  # one vocabulary, both runners
    assert q8["kv_element"] == q8_type and f16["kv_element"] in ("float16", "f16")
    assert q8["runner"] == f16["runner"] == runner
    assert 0.45 < q8["kv_cache_bytes"] / f16["kv_cache_bytes"] < 0.56


def test_q4_on_torch_is_one_line_naming_the_flag(starter_gguf: Path) -> None:
    out = _run(starter_gguf, "--runner", "torch", "--kv-cache", "q4")
    assert out.returncode != 0
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "--kv-cache q4" in lines[0] and "llama.cpp" in lines[0]


def test_ctx_auto_loads_and_says_what_it_chose(starter_gguf: Path) -> None:
    out = _run(starter_gguf, "--runner", "llama.cpp", "--ctx", "auto", "--kv-cache", "q4")
    record = _record(out)
    match = re.search(
        r"^ember: context (\d+) tokens \(auto: .*GiB free after weights, KV q4\)$",
        out.stderr,
        re.MULTILINE,
    )
    assert match, out.stderr
    ctx = int(match.group(1))
    assert 256 <= ctx <= 32768 and ctx % 256 == 0  # the starter model's trained context: 32768
    assert record["context_limit"] == ctx and record["kv_cache"] == "q4"
    assert record["kv_element"] == "q4_0"
