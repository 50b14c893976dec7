"""A request past the context (issue 23 part 4): the OpenAI routes answer llama-server's 400
(`exceed_context_size_error` with `n_prompt_tokens` and `n_ctx`) when the prompt cannot fit, or
prompt + an explicit max_tokens cannot; the Anthropic route refuses a prompt that cannot fit
in its own shape. The real
app under uvicorn, a real EngineThread over the fake runner (a byte-level tokenizer)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.app.server.server_harness import fake_engine_server

CTX = 1024
LONG = "a" * (2 * CTX)


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with fake_engine_server(CTX, max_tokens_cap=64) as url:
        yield url


def _post(url: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(url, json={"model": "fake", **body}, timeout=60)


def _exceeded(reply: httpx.Response, n_prompt_tokens: int | None = None) -> None:
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["type"] == "exceed_context_size_error" and error["n_ctx"] == CTX
    assert error["n_prompt_tokens"] == (n_prompt_tokens or error["n_prompt_tokens"])
    assert "exceeds the available context size" in error["message"]


def test_prompt_plus_an_explicit_max_tokens_past_the_context_is_refused(server: str) -> None:
    url = f"{server}/v1/completions"
    probe = _post(url, {"prompt": "a" * 100, "max_tokens": 1})
    overhead = probe.json()["usage"]["prompt_tokens"] - 100  # <bos>
    prompt = "a" * (1000 - overhead)  # 1000 prompt tokens
    _exceeded(_post(url, {"prompt": prompt, "max_tokens": 64}), n_prompt_tokens=1000)
    fits = _post(url, {"prompt": prompt, "max_tokens": 24})  # 1000 + 24 == n_ctx
    assert fits.status_code == 200 and fits.json()["usage"]["prompt_tokens"] == 1000
    # no max_tokens given: the sink window lets the reply go on, so only the prompt must fit
    assert _post(url, {"prompt": prompt}).status_code == 200


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/completions", {"prompt": LONG}),
        ("/v1/completions", {"prompt": ["hi", LONG]}),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": LONG}]}),
        ("/v1/responses", {"input": LONG, "store": False}),
    ],
)
def test_a_prompt_past_the_context_is_refused_on_every_openai_route(
    server: str, path: str, body: dict[str, Any]
) -> None:
    _exceeded(_post(f"{server}{path}", body))
    ok = _post(f"{server}/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]})
    assert ok.status_code == 200  # the engine goes on


def test_the_anthropic_route_refuses_in_its_own_shape(server: str) -> None:
    url = f"{server}/v1/messages"
    long = {"max_tokens": 8, "messages": [{"role": "user", "content": LONG}]}
    reply = _post(url, long)
    assert reply.status_code == 400
    assert reply.json()["type"] == "error"
    assert reply.json()["error"]["type"] == "invalid_request_error"
    assert reply.json()["error"]["message"].startswith("prompt is too long: ")
    near = {"max_tokens": 64, "messages": [{"role": "user", "content": "a" * 990}]}
    assert _post(url, near).status_code == 200  # max_tokens is bounded by the cap, not the rest


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/chat", {"messages": [{"role": "user", "content": "b" + LONG}]}),
        ("/api/generate", {"prompt": "b" + LONG}),
        ("/api/generate", {"prompt": "b" + LONG, "raw": True}),
    ],
)
def test_the_ollama_routes_keep_the_end_of_one_long_message(
    server: str, path: str, body: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    """No older message to drop: the start of the latest goes, as Ollama's runner keeps a
    prompt's last tokens, so the reply comes at once instead of after a prefill past the
    context (issue 25: a private-use message held the engine for minutes)."""
    fields = {"stream": False, "options": {"num_predict": 4}}
    with caplog.at_level(logging.WARNING):
        reply = _post(f"{server}{path}", body | fields)
    assert reply.status_code == 200, reply.text
    assert CTX - 16 <= reply.json()["prompt_eval_count"] < CTX  # cut to fit, not to nothing
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "truncating input prompt" in said and "the first " in said


def test_a_system_prompt_past_the_context_is_a_400_on_the_ollama_routes(server: str) -> None:
    turns = [{"role": "system", "content": LONG}, {"role": "user", "content": "hi"}]
    reply = _post(f"{server}/api/chat", {"messages": turns, "stream": False})
    assert reply.status_code == 400
    assert reply.json()["error"].startswith("messages: the system prompt alone needs")
