"""Ollama's `context` on /api/generate (issue 23 part 4): the final response carries the token
ids of prompt + reply, streamed or not; a request that passes them back continues from them
(templated or raw); bad ids are a 400 naming the field; a context past the model's context is
cut at its head, as Ollama cuts a long prompt. The real app under uvicorn, a real EngineThread
over the fake runner (a byte-level tokenizer: one token per byte, <bos> = 1)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from ember.app.server.errors import RequestInvalid
from ember.app.server.ollama_requests import MAX_CONTEXT_IDS, parse_generate
from ember.engine.runners.fake import BOS_ID, FAKE_VOCAB
from tests.app.server.server_harness import fake_engine_server

CTX = 256


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with fake_engine_server(CTX, max_tokens_cap=64) as url:
        yield url


def _generate(url: str, **fields: Any) -> httpx.Response:
    body = {"model": "fake", "stream": False, "options": {"num_predict": 6, "temperature": 0}}
    return httpx.post(f"{url}/api/generate", json=body | fields, timeout=60)


def _final_line(reply: httpx.Response) -> dict[str, Any]:
    lines = [json.loads(line) for line in reply.text.splitlines() if line]
    assert lines[-1]["done"] is True and all("context" not in x for x in lines[:-1])
    return lines[-1]


@pytest.mark.parametrize("raw", [False, True])
def test_context_is_returned_and_continued(server: str, raw: bool) -> None:
    first = _generate(server, prompt="why is the sky blue?", raw=raw).json()
    context = first["context"]
    assert context[0] == BOS_ID and len(context) == first["prompt_eval_count"] + 6
    assert bytes(t - 4 for t in context[-6:]).decode("utf-8", "replace") == first["response"]
    streamed = _final_line(_generate(server, prompt="why is the sky blue?", raw=raw, stream=True))
    assert streamed["context"] == context  # greedy: the same exchange
    alone = _generate(server, prompt="and at night?", raw=raw).json()
    second = _generate(server, prompt="and at night?", raw=raw, context=context).json()
    # the new prompt's ids follow the context's, less their own <bos>
    assert second["prompt_eval_count"] == len(context) + alone["prompt_eval_count"] - 1
    assert second["context"][: len(context)] == context


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"context": "1,2"}, "context"),
        ({"context": {"ids": [1]}}, "context"),
        ({"context": [1, -2]}, "context[1]"),
        ({"context": [1, 2.5]}, "context[1]"),
        ({"context": [True]}, "context[0]"),
        ({"context": [1, FAKE_VOCAB]}, "context[1]"),
        ({"context": [1, 5], "prompt": ""}, "context"),
        ({"context": [1, 5], "suffix": "x"}, "context"),
        ({"raw": "yes"}, "raw"),
    ],
)
def test_bad_context_is_a_400_naming_it(server: str, fields: dict, param: str) -> None:
    reply = _generate(server, **({"prompt": "hi"} | fields))
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"].startswith(f"{param}: ")


def test_context_length_is_bounded_before_the_model_is_asked() -> None:
    body = {"model": "fake", "prompt": "hi", "context": [1] * (MAX_CONTEXT_IDS + 1)}
    with pytest.raises(RequestInvalid, match="^context: must be a list of at most"):
        parse_generate(body, 64)


def test_a_context_past_the_window_is_cut_at_its_head(
    server: str, caplog: pytest.LogCaptureFixture
) -> None:
    context = [BOS_ID, *([4 + ord("a")] * (2 * CTX))]
    with caplog.at_level(logging.WARNING):
        reply = _generate(server, prompt="hi", raw=True, context=context)
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["prompt_eval_count"] < CTX and body["context"][0] == BOS_ID
    assert any("context ids" in r.getMessage() for r in caplog.records)
