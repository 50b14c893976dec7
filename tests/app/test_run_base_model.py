"""`ember run` on the starter (a base model) answers a first question and stops on its own."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.model
def test_starter_names_paris_and_stops_before_the_limit(starter_gguf: Path) -> None:
    argv = [
        sys.executable,
        "-m",
        "ember",
        "run",
        str(starter_gguf),
        "--temperature",
        "0",
        "What is the capital of France?",
        "--max-tokens",
        "64",
        "--threads",
        "2",
        "--json",
    ]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    record = json.loads(out.stdout.strip().splitlines()[-1])
    assert "Paris" in record["text"]
    assert record["finish_reason"] == "stop" and record["generated_tokens"] < 64
    assert out.stdout.startswith(record["text"] + "\n")  # streamed: no leading space, no "User:"


@pytest.mark.model
def test_the_instruction_template_loops_and_the_detector_ends_it(starter_gguf: Path) -> None:
    """The old path (Gemma's IT template on the base model) repeats the question forever; the
    loop detector ends it with finish_reason "loop" well before --max-tokens."""
    argv = [
        sys.executable,
        "-m",
        "ember",
        "run",
        str(starter_gguf),
        "What is the capital of France?",
        "--chat-format",
        "template",
        "--temperature",
        "0",
        "--dry-multiplier",
        "0",
        "--loop-min-tokens",
        "32",
        "--max-tokens",
        "200",
        "--threads",
        "2",
        "--json",
    ]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    record = json.loads(out.stdout.strip().splitlines()[-1])
    assert record["finish_reason"] == "loop" and record["generated_tokens"] < 200
