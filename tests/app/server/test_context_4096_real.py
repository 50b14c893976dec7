"""Turns past the default 4096-token context through a real `ember serve --runner llama.cpp`
(issue 25: "a second chat turn past the 4096-token context on the server: 500 llama_decode
failed (invalid batch)"). Each turn's prompt fits and its reply (256 tokens, the default, with
ignore_eos) runs past the context, so the sink window drops and shifts blocks; the next turn
repeats the history, reading what survived from the prefix cache; then two conversations do the
same at once. Every turn is answered in full, never a 500, and the server log stays clean. Slow:
each turn prefills about 4000 tokens (on 2 cores at load 6-10: 10 and 24 minutes)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.app.server.server_harness import serve_models

pytestmark = [pytest.mark.model, pytest.mark.slow, pytest.mark.timeout(3000)]

MODEL = "gemma3"
CTX = 4096
REPLY = 256  # /v1/completions' default max_tokens: not explicit, so only the prompt must fit


@pytest.fixture(scope="module")
def server(starter_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    home = tmp_path_factory.mktemp("serve_home")
    serve = ("--model", MODEL, "--runner", "llama.cpp", "--threads", "2", "--ctx", str(CTX))
    with serve_models(home, {MODEL: starter_gguf}, *serve) as url:
        yield url
    log = (home / "serve.log").read_text()
    assert "invalid batch" not in log and "runner failed" not in log


def _words(seed: int, count: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(1000, 20000) for _ in range(count)]


def _turn(url: str, ids: list[int]) -> None:
    """One greedy completion of prompt ids whose reply runs past the context."""
    body = {"model": MODEL, "prompt": ids, "temperature": 0, "ignore_eos": True}
    reply = httpx.post(f"{url}/v1/completions", json=body, timeout=1800)
    assert reply.status_code == 200, reply.text
    usage = reply.json()["usage"]
    assert usage["prompt_tokens"] == len(ids) and usage["completion_tokens"] == REPLY
    assert usage["prompt_tokens"] + REPLY > CTX  # the reply went past the context


def test_second_and_third_turns_past_the_context(server: str) -> None:
    first = [2, *_words(1, 3900)]
    _turn(server, first)
    second = [*first, *_words(2, 60)]  # shares the first turn's prefix, evicted and shifted
    _turn(server, second)
    _turn(server, [*second, *_words(3, CTX - len(second) - 2)])  # one token of room left


def test_two_conversations_past_the_context_at_once(server: str) -> None:
    prompts = [[2, *_words(10 + i, 3880 + 60 * i)] for i in range(2)]
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda ids: _turn(server, ids), prompts))
        seconds = [[*ids, *_words(20 + i, 40)] for i, ids in enumerate(prompts)]
        list(pool.map(lambda ids: _turn(server, ids), seconds))
