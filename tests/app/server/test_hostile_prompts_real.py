"""Prompts that cannot fit, against a real `ember serve --ctx 1024` on the starter (issue 25):
a message of 20,000 private-use characters (about 58,000 tokens: each is three byte tokens) is
refused at once by the OpenAI (chat, Responses) and Anthropic routes, saying how many tokens it needs and what
the context holds, and answered by Ollama's /api/chat after the start of the message is cut
(as Ollama keeps a prompt's end), all in bounded time; the next plain chat still answers and
/health stays true. (Before: an 18.7k-token prefill held the engine, and every chat behind
it, while /health said ok.)"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.app.server.server_harness import serve_models

pytestmark = pytest.mark.model

MODEL = "gemma3"
CTX = 1024
# 20,000 private-use characters spread over U+E000..U+F8FF (6400 code points)
PRIVATE = "".join(chr(0xE000 + (i * 37) % 0x1900) for i in range(20_000))
BOUND_S = 60  # a refusal is a count (well under a second); the cut prompt fills one context


@pytest.fixture(scope="module")
def server(starter_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    home = tmp_path_factory.mktemp("serve_home")
    serve = ("--model", MODEL, "--threads", "2", "--ctx", str(CTX))
    with serve_models(home, {MODEL: starter_gguf}, *serve) as url:
        yield url


def _timed(url: str, path: str, body: dict) -> tuple[httpx.Response, float]:
    started = time.perf_counter()
    reply = httpx.post(f"{url}{path}", json={"model": MODEL, **body}, timeout=300)
    return reply, time.perf_counter() - started


def _plain_chat_answers(url: str) -> None:
    ask = {"messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 4}
    reply, _ = _timed(url, "/v1/chat/completions", ask)
    assert reply.status_code == 200 and reply.json()["choices"][0]["message"]["content"]
    assert httpx.get(f"{url}/health", timeout=10).json()["status"] == "ok"


def test_a_private_use_message_is_refused_in_its_api_shape(server: str) -> None:
    message = [{"role": "user", "content": PRIVATE}]
    reply, seconds = _timed(server, "/v1/chat/completions", {"messages": message})
    assert reply.status_code == 400 and seconds < BOUND_S
    error = reply.json()["error"]
    assert error["type"] == "exceed_context_size_error" and error["n_ctx"] == CTX
    assert error["n_prompt_tokens"] > 3 * len(PRIVATE) // 2
    reply, seconds = _timed(server, "/v1/responses", {"input": PRIVATE, "store": False})
    assert reply.status_code == 400 and seconds < BOUND_S
    assert reply.json()["error"]["type"] == "exceed_context_size_error"
    reply, seconds = _timed(server, "/v1/messages", {"max_tokens": 8, "messages": message})
    assert reply.status_code == 400 and seconds < BOUND_S
    assert reply.json()["error"]["message"].startswith("prompt is too long: ")
    _plain_chat_answers(server)


def test_a_private_use_message_is_cut_and_answered_on_ollamas_route(server: str) -> None:
    body = {"messages": [{"role": "user", "content": PRIVATE}], "stream": False,
            "options": {"num_predict": 8}}  # fmt: skip
    reply, seconds = _timed(server, "/api/chat", body)
    assert reply.status_code == 200, reply.text
    assert seconds < BOUND_S, seconds
    done = reply.json()
    assert done["done"] and CTX // 2 < done["prompt_eval_count"] < CTX
    _plain_chat_answers(server)
