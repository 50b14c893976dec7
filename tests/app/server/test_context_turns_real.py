"""Chat turns past the context through a real `ember serve` (issue 25: a second turn past the
context answered 500 "llama_decode failed (invalid batch)"). Ollama's /api/chat gets turn one,
whose prompt plus reply overflow --ctx 128, then turns two and three with the whole history: each
is answered (Ollama's routes truncate, as Ollama does). The official `openai` SDK sending that
history gets llama-server's 400 `exceed_context_size_error` naming the sizes (issue 23), never a
500."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.app.server.server_harness import serve_models

pytestmark = pytest.mark.model
openai = pytest.importorskip("openai")

MODEL = "gemma3"
CTX = 128


@pytest.fixture(scope="module")
def server(starter_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    home = tmp_path_factory.mktemp("serve_home")
    serve = ("--model", MODEL, "--threads", "2", "--ctx", str(CTX))
    with serve_models(home, {MODEL: starter_gguf}, *serve) as url:
        yield url


def test_turns_past_the_context_keep_answering(server: str) -> None:
    import httpx

    messages: list[dict[str, str]] = []
    asks = ["Tell me a long story about a lighthouse keeper.", "Go on, what happened next?",
            "And how did it end?"]  # fmt: skip
    for turn, ask in enumerate(asks):
        messages.append({"role": "user", "content": ask})
        options = {"num_predict": CTX, "temperature": 0, "seed": turn}
        body = {"model": MODEL, "messages": messages, "stream": False, "options": options}
        reply = httpx.post(f"{server}/api/chat", json=body, timeout=300)
        assert reply.status_code == 200, (turn, reply.text)
        content = reply.json()["message"]["content"]
        assert content and reply.json()["done"], turn
        messages.append({"role": "assistant", "content": content})
    client: Any = openai.OpenAI(base_url=f"{server}/v1", api_key="none", max_retries=0)
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model=MODEL, messages=messages, max_tokens=8)
    error = refused.value.body
    assert error["type"] == "exceed_context_size_error"
    assert error["n_prompt_tokens"] > CTX == error["n_ctx"]  # the history alone is past it
