"""The real `ember serve` process, nothing injected: the registry lists the models, app's loader
resolves and loads them, the official openai client talks to it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ember.app.loading import open_registry
from tests.app.server.server_harness import ember_serve


@pytest.fixture(params=["llama", "qwen3moe"])  # a dense family and a mixture of experts
def served(tiny_models: Any, ember_home: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """`ember serve` on a free port over this test's EMBER_HOME, with one registered model."""
    registry = open_registry()
    registry.add_path(tiny_models.gguf(request.param, "Q8_0"), name="tiny")
    args = ("--runner", "torch", "--device", "cpu", "--threads", "1")
    ember_home.mkdir(parents=True, exist_ok=True)
    with ember_serve(ember_home, dict(os.environ), *args) as url:
        yield url


def test_models_list_and_completion_with_the_openai_client(served: str) -> None:
    import openai

    client = openai.OpenAI(base_url=f"{served}/v1", api_key="unused", max_retries=0)
    assert [m.id for m in client.models.list()] == ["tiny"]  # was a 500: registry.list_models
    reply = client.completions.create(model="tiny", prompt="hello", max_tokens=3, temperature=0)
    assert reply.model == "tiny" and reply.usage is not None
    assert reply.usage.completion_tokens == 3
    assert open_registry().get("tiny").last_used_at is not None  # app marked it used


def test_a_model_name_with_a_lone_surrogate_is_refused_not_a_500(served: str) -> None:
    """The registry (SQLite) cannot look such a name up: every route refuses it first."""
    headers = {"content-type": "application/json"}
    ask = b'"messages": [{"role": "user", "content": "hi"}]'
    for path, body, status in (
        ("/api/chat", b'{"model": "t\\ud800", "stream": false, %s}' % ask, 400),
        ("/v1/chat/completions", b'{"model": "t\\ud800", %s}' % ask, 404),
        ("/api/show", b'{"model": "t\\ud800"}', 404),
    ):
        reply = httpx.post(f"{served}{path}", content=body, headers=headers, timeout=60)
        assert reply.status_code == status, (path, reply.text)
    assert httpx.get(f"{served}/v1/models/t%ED%A0%80", timeout=30).status_code == 404
