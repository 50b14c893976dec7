"""Embeddings from a real `ember serve` process, nothing injected: the official openai and ollama
clients on the starter model (a chat model: mean-pooled, as Ollama does) and on an embedding
model registered with `ember add` (the tiny BERT GGUF), plus refusals naming the field."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import httpx
import numpy as np
import pytest

from tests.app.server.server_harness import serve_models
from tests.fixtures.tiny_bert import HIDDEN, write_tiny_bert

pytestmark = pytest.mark.model
MODEL, BERT = "gemma3", "tiny-bert"
CAT, KITTEN, TAX = (
    "The cat sat on the mat.",
    "A kitten rested on the rug.",
    "Income tax returns are due in April.",
)


@pytest.fixture(scope="module")
def server(starter_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    home = tmp_path_factory.mktemp("embed_home")
    bert = write_tiny_bert(home / "tiny-bert.gguf")
    serve = ("--model", MODEL, "--threads", "2", "--ctx", "512")
    with serve_models(home, {MODEL: starter_gguf, BERT: bert}, *serve) as url:
        yield url


def _openai(url: str):
    import openai

    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=300)


def test_openai_client_on_the_chat_model(server: str) -> None:
    reply = _openai(server).embeddings.create(model=MODEL, input=[CAT, KITTEN, TAX])
    vectors = np.array([d.embedding for d in reply.data])
    assert vectors.shape == (3, 640) and reply.model == MODEL
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    similar, unrelated = vectors[0] @ vectors[1], vectors[0] @ vectors[2]
    assert similar > unrelated + 0.1, (similar, unrelated)
    assert reply.usage.prompt_tokens > 3 * 5


def test_ollama_client_gives_the_same_vectors(server: str) -> None:
    import ollama

    via_ollama = ollama.Client(host=server, timeout=300).embed(model=MODEL, input=[CAT, TAX])
    via_openai = _openai(server).embeddings.create(
        model=MODEL, input=[CAT, TAX], encoding_format="float"
    )
    np.testing.assert_allclose(
        via_ollama.embeddings, [d.embedding for d in via_openai.data], atol=1e-5
    )
    assert via_ollama.prompt_eval_count == via_openai.usage.prompt_tokens


def test_an_embedding_model_added_with_ember_add(server: str) -> None:
    import ollama

    reply = _openai(server).embeddings.create(model=BERT, input="hello world")
    assert len(reply.data[0].embedding) == HIDDEN and reply.usage.prompt_tokens == 4
    out = ollama.Client(host=server, timeout=300).embed(model=BERT, input=["hello", "world"])
    assert np.array(out.embeddings).shape == (2, HIDDEN)


def test_refusals_name_the_field(server: str) -> None:
    import ollama
    import openai

    client = _openai(server)
    too_long = " ".join(["cat"] * 700)  # over --ctx 512
    with pytest.raises(openai.BadRequestError, match="exceed the model's context"):
        client.embeddings.create(model=MODEL, input=["ok", too_long])
    with pytest.raises(openai.BadRequestError, match="dimensions"):
        client.embeddings.create(model=MODEL, input="cat", dimensions=64)
    with pytest.raises(openai.BadRequestError, match="input"):
        client.embeddings.create(model=MODEL, input=["x"] * 2049)
    with pytest.raises(openai.NotFoundError, match="not served here"):
        client.embeddings.create(model="no-such-model", input="cat")
    response = httpx.post(f"{server}/v1/embeddings", json={"model": MODEL, "input": [{}]})
    assert response.status_code == 400 and response.json()["error"]["param"] == "input[0]"
    with pytest.raises(ollama.ResponseError, match="options.temperature"):
        ollama.Client(host=server, timeout=300).embed(
            model=MODEL, input="cat", options={"temperature": 0.5}
        )


def test_ollama_show_tells_the_model_files(server: str) -> None:
    import ollama

    client = ollama.Client(host=server, timeout=300)
    chat = client.show(MODEL)
    assert "<start_of_turn>" in (chat.template or "")  # Gemma's own template
    assert chat.modelinfo is not None and chat.modelinfo["gemma3.embedding_length"] == 640
    assert chat.modelinfo["tokenizer.ggml.tokens"] is None  # a 262k array is left out
    assert chat.capabilities == ["completion", "tools", "embedding"]
    bert = client.show(BERT)
    assert bert.capabilities == ["embedding"]
    assert bert.modelinfo is not None and bert.modelinfo["bert.pooling_type"] == 1
    response = httpx.post(f"{server}/api/show", json={"model": MODEL, "verbose": True})
    assert response.status_code == 400 and response.json()["error"].startswith("verbose:")


def test_ember_ps_and_stop_see_an_embedder(server: str, tmp_path: Path) -> None:
    import ollama

    env = {**os.environ, "EMBER_SERVER": server, "EMBER_HOME": str(tmp_path)}

    def ember(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "ember", *args], env=env,
                              capture_output=True, text=True, timeout=300)  # fmt: skip

    def listed() -> dict[str, dict[str, str]]:
        shown = ember("ps", "--json")
        assert shown.returncode == 0, shown.stderr
        return {card["name"]: card for card in json.loads(shown.stdout)}

    client = ollama.Client(host=server, timeout=300)
    client.embed(model=BERT, input="cat", keep_alive=0)  # unloaded once done
    assert BERT not in listed()
    client.embed(model=BERT, input="cat", keep_alive="5m")
    expires = datetime.fromisoformat(listed()[BERT]["expires_at"].replace("Z", "+00:00"))
    assert 240 < expires.timestamp() - time.time() <= 300
    stopped = ember("stop", BERT)
    assert stopped.returncode == 0 and stopped.stdout.strip() == f"unloaded {BERT}"
    assert BERT not in listed()
    again = ember("stop", BERT)
    assert again.returncode != 0 and "not loaded" in again.stderr
