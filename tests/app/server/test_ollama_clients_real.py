"""Ollama clients against a real `ember serve --metrics` on the starter model (one server for
the module): `/api/generate`'s `context` through the official `ollama` client and raw HTTP (a
second generate that passes the first's context continues it, and reads the first exchange from
the prefix cache), and litellm's `ollama/` route, whole and streamed."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.app.server.server_harness import SAME_LOGITS_RUNNER, serve_models

pytestmark = pytest.mark.model
ollama = pytest.importorskip("ollama")

MODEL = "gemma3"
OPTIONS = {"temperature": 0, "num_predict": 12}


@pytest.fixture(scope="module")
def server(starter_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    serve = ("--model", MODEL, *SAME_LOGITS_RUNNER, "--threads", "2", "--ctx", "1024", "--metrics")
    home = tmp_path_factory.mktemp("serve_home")
    with serve_models(home, {MODEL: starter_gguf}, *serve) as url:
        yield url


def _prefilled(url: str) -> float:
    """llama-server's counter of prompt tokens computed (not read from the prefix cache)."""
    text = httpx.get(f"{url}/metrics", timeout=60).text
    values = dict(line.split(" ") for line in text.splitlines() if line[:1] != "#")
    return float(values["llamacpp:prompt_tokens_total"])


def test_the_ollama_client_continues_from_context(server: str) -> None:
    client = ollama.Client(host=server, timeout=300)
    first = client.generate(model=MODEL, prompt="The capital of France is", options=OPTIONS)
    context = list(first.context or [])
    # the prompt's ids and the reply's (less a chat stop string the scaffold cut: eval_count
    # counts those tokens too)
    assert first.prompt_eval_count < len(context) <= first.prompt_eval_count + first.eval_count
    alone = client.generate(model=MODEL, prompt="And of Spain?", options=OPTIONS)
    before = _prefilled(server)
    second = client.generate(model=MODEL, prompt="And of Spain?", context=context, options=OPTIONS)
    # the new prompt's tokens follow the context's (less their own <bos>)
    assert second.prompt_eval_count == len(context) + alone.prompt_eval_count - 1
    assert list(second.context or [])[: len(context)] == context
    # the first exchange is read from the prefix cache: only its last partial block and the
    # new prompt are computed (16-token blocks)
    computed = _prefilled(server) - before
    assert computed < alone.prompt_eval_count + 16, (computed, second.prompt_eval_count)
    assert second.response.strip()


def test_raw_http_streamed_context_matches_and_continues(server: str) -> None:
    body = {"model": MODEL, "prompt": "Once upon a time", "raw": True, "options": OPTIONS}
    whole = httpx.post(f"{server}/api/generate", json=body | {"stream": False}, timeout=300)
    lines = [json.loads(x) for x in httpx.post(
        f"{server}/api/generate", json=body, timeout=300).text.splitlines()]  # fmt: skip
    assert lines[-1]["done"] and "context" not in lines[0]
    assert lines[-1]["context"] == whole.json()["context"]  # greedy: the same exchange
    context = lines[-1]["context"]
    more = body | {"prompt": " there was", "context": context, "stream": False}
    second = httpx.post(f"{server}/api/generate", json=more, timeout=300).json()
    assert second["context"][: len(context)] == context
    assert second["prompt_eval_count"] > len(context)
    bad = httpx.post(f"{server}/api/generate", json=more | {"context": [2, 10**9]}, timeout=60)
    assert bad.status_code == 400 and bad.json()["error"].startswith("context[1]: ")


@pytest.fixture(scope="module")
def litellm() -> Any:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch at import: offline
    return pytest.importorskip("litellm")


def test_litellm_ollama_route(server: str, litellm: Any) -> None:
    ask = [{"role": "user", "content": "Name a color."}]
    fields = {"model": f"ollama/{MODEL}", "api_base": server, "messages": ask, "max_tokens": 12}
    reply = litellm.completion(**fields, temperature=0, timeout=300)
    text = reply.choices[0].message.content
    assert isinstance(text, str) and text.strip()
    chunks = litellm.completion(**fields, temperature=0, stream=True, timeout=300)
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert streamed == text
