"""The real `ember serve` process, nothing injected: the registry lists the models, app's loader
resolves and loads them, the official openai client talks to it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from ember.app.loading import open_registry
from tests.app.server.server_harness import free_port


@pytest.fixture
def ember_serve(tiny_models: Any) -> Iterator[str]:
    """`ember serve` on a free port over this test's EMBER_HOME, with one registered model."""
    registry = open_registry()
    registry.add_path(tiny_models.gguf("llama", "Q8_0"), name="tiny")
    port = free_port()
    argv = [sys.executable, "-m", "ember", "serve", "--port", str(port)]
    argv += ["--runner", "torch", "--device", "cpu", "--threads", "1"]
    proc = subprocess.Popen(argv, env=dict(os.environ), stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:  # wait until it answers (or died)
            if proc.poll() is not None:
                raise AssertionError(
                    f"ember serve exited: {proc.stderr.read() if proc.stderr else ''}"
                )
            try:
                if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "ember serve did not start"
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_models_list_and_completion_with_the_openai_client(ember_serve: str) -> None:
    import openai

    client = openai.OpenAI(base_url=f"{ember_serve}/v1", api_key="unused", max_retries=0)
    assert [m.id for m in client.models.list()] == ["tiny"]  # was a 500: registry.list_models
    reply = client.completions.create(model="tiny", prompt="hello", max_tokens=3, temperature=0)
    assert reply.model == "tiny" and reply.usage is not None
    assert reply.usage.completion_tokens == 3
    assert open_registry().get("tiny").last_used_at is not None  # app marked it used


def test_a_model_name_with_a_lone_surrogate_is_refused_not_a_500(ember_serve: str) -> None:
    """The registry (SQLite) cannot look such a name up: every route refuses it first."""
    headers = {"content-type": "application/json"}
    ask = b'"messages": [{"role": "user", "content": "hi"}]'
    for path, body, status in (
        ("/api/chat", b'{"model": "t\\ud800", "stream": false, %s}' % ask, 400),
        ("/v1/chat/completions", b'{"model": "t\\ud800", %s}' % ask, 404),
        ("/api/show", b'{"model": "t\\ud800"}', 404),
    ):
        reply = httpx.post(f"{ember_serve}{path}", content=body, headers=headers, timeout=60)
        assert reply.status_code == status, (path, reply.text)
    assert httpx.get(f"{ember_serve}/v1/models/t%ED%A0%80", timeout=30).status_code == 404
