"""`ember run --remote URL --model NAME` runs a model on an OpenAI-compatible server."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.engine.remote.remote_server import serve


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, EMBER_REMOTE_API_KEY="k")
    return subprocess.run(
        [sys.executable, "-m", "ember", "run", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def test_run_remote_streams_and_reports_runner() -> None:
    with serve(api_key="k") as server:
        out = _run("ok", "Say hello", "--remote", server.url, "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["text"] == "Hello, world!" and result["runner"] == "remote"
    assert server.requests[-1]["messages"][-1]["content"] == "Say hello"


def test_run_remote_error_is_one_line() -> None:
    with serve(api_key="k") as server:
        out = _run("e500", "Say hello", "--remote", server.url)
    assert out.returncode != 0
    assert len(out.stderr.strip().splitlines()) == 1 and "500" in out.stderr


def test_run_writes_reasoning_to_stderr_and_the_answer_to_stdout() -> None:
    """A reply's <think> part (split as it streams, tags cut across chunks) is not the answer:
    stdout carries the answer alone, stderr the reasoning; --json has both apart."""
    with serve(api_key="k") as server:
        plain = _run("think", "Capital of France?", "--remote", server.url)
        as_json = _run("think", "Capital of France?", "--remote", server.url, "--json")
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout == "Paris.\n"
    assert "The capital is Paris." in plain.stderr and "<think>" not in plain.stderr
    record = json.loads(as_json.stdout.strip().splitlines()[-1])
    assert record["content"] == "Paris." and record["reasoning"] == "The capital is Paris."
    assert record["text"] == "<think>The capital is Paris.</think>Paris."  # as the model wrote it


def test_run_raw_prompt_is_written_as_the_model_wrote_it() -> None:
    with serve(api_key="k") as server:
        out = _run("think", "Capital of France?", "--remote", server.url, "--raw")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "<think>The capital is Paris.</think>Paris.\n"
