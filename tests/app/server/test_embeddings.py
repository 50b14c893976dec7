"""The embedding routes on a live server with the tiny BERT GGUF, through the official openai and
ollama clients and raw HTTP: vectors, base64, token-id inputs, keep_alive, and every refusal
naming its field. (tests/app/server/test_embeddings_real.py runs a real `ember serve`.)"""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import httpx
import numpy as np
import pytest

from ember.app.server.embedder_pool import EmbedderPool
from ember.app.server.pool import ModelPool
from ember.app.server.security import Guard
from ember.engine.api import EngineOptions, ModelFiles
from ember.engine.embedding import Embedder
from ember.engine.load import load_embedder
from ember.models.errors import RegistryError
from tests.app.scripted_backend import ScriptedBackend
from tests.app.server.server_harness import running_server
from tests.fixtures.tiny_bert import CONTEXT, HIDDEN, write_tiny_bert

pytest.importorskip("llama_cpp")
TEXTS = ["the cat sat on the mat", "hello world"]


class Embedders:
    """Loads the tiny BERT as `bert` (and `rank`, a reranker); counts loads and closes."""

    def __init__(self, folder: Path) -> None:
        self.paths = {
            "bert": write_tiny_bert(folder / "bert.gguf"),
            "rank": write_tiny_bert(folder / "rank.gguf", pooling="rank"),
        }
        self.loads: list[str] = []

    def __call__(self, name: str) -> Embedder:
        if name not in self.paths:
            raise RegistryError(f"model {name!r} not found")
        self.loads.append(name)
        options = EngineOptions(model=name, runner="llama.cpp", device="cpu", threads=1)
        return load_embedder(options, ModelFiles(name, self.paths[name], "gguf", "0" * 64))


@pytest.fixture(scope="module")
def loader(tmp_path_factory: pytest.TempPathFactory) -> Embedders:
    return Embedders(tmp_path_factory.mktemp("embed"))


@pytest.fixture(scope="module")
def server(loader: Embedders) -> Iterator[str]:
    names = ["bert", "rank", "chat"]
    pool = ModelPool(lambda n: ScriptedBackend(n, ["x"]), lambda: names, default_model="bert")
    with running_server(pool, Guard(bind_host="127.0.0.1"), EmbedderPool(loader, pool)) as url:
        yield url


def _openai(url: str):
    import openai

    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=60)


def test_openai_client_float_and_base64(server: str) -> None:
    client = _openai(server)
    floats = client.embeddings.create(model="bert", input=TEXTS, encoding_format="float")
    packed = client.embeddings.create(model="bert", input=TEXTS)  # the client asks for base64
    a = np.array([d.embedding for d in floats.data])
    b = np.array([d.embedding for d in packed.data])
    assert a.shape == (2, HIDDEN) and [d.index for d in floats.data] == [0, 1]
    np.testing.assert_allclose(a, b, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    assert floats.usage.prompt_tokens == floats.usage.total_tokens == 8 + 4
    assert floats.model == "bert"


def test_raw_base64_is_little_endian_float32(server: str) -> None:
    body = {"model": "bert", "input": "hello world", "encoding_format": "base64"}
    raw = httpx.post(f"{server}/v1/embeddings", json=body).json()["data"][0]["embedding"]
    body["encoding_format"] = "float"
    floats = httpx.post(f"{server}/v1/embeddings", json=body).json()["data"][0]["embedding"]
    np.testing.assert_allclose(np.frombuffer(base64.b64decode(raw), "<f4"), floats, atol=1e-7)


def test_token_id_inputs_and_the_default_model(server: str) -> None:
    ids = [2, 18, 19, 3]  # [CLS] hello world [SEP] in the tiny vocabulary
    by_ids = httpx.post(f"{server}/v1/embeddings", json={"input": [ids, ids[1:3]]}).json()
    by_text = httpx.post(f"{server}/v1/embeddings", json={"input": "hello world"}).json()
    assert by_ids["model"] == "bert" and by_ids["usage"]["prompt_tokens"] == 6
    np.testing.assert_allclose(
        by_ids["data"][0]["embedding"], by_text["data"][0]["embedding"], atol=1e-6
    )


def test_ollama_client_embed_and_legacy(server: str) -> None:
    import ollama

    client = ollama.Client(host=server, timeout=60)
    out = client.embed(model="bert", input=TEXTS)
    vectors = np.array(out.embeddings)
    assert vectors.shape == (2, HIDDEN) and out.prompt_eval_count == 12
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    legacy = np.array(client.embeddings(model="bert", prompt=TEXTS[1]).embedding)
    np.testing.assert_allclose(legacy / np.linalg.norm(legacy), vectors[1], atol=1e-5)
    assert abs(np.linalg.norm(legacy) - 1.0) > 1e-3  # the legacy route is not normalized
    long = " ".join(["cat"] * (CONTEXT + 10))
    assert client.embed(model="bert", input=long).prompt_eval_count == CONTEXT  # truncated
    with pytest.raises(ollama.ResponseError, match="exceed the model's context") as err:
        client.embed(model="bert", input=long, truncate=False)
    assert err.value.status_code == 400


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "bert"}, "input"),
        ({"model": "bert", "input": 5}, "input"),
        ({"model": "bert", "input": []}, "input"),
        ({"model": "bert", "input": ["cat", ""]}, "input[1]"),
        ({"model": "bert", "input": ["cat", 3]}, "input[1]"),
        ({"model": "bert", "input": ["x"] * 2049}, "input"),
        ({"model": "bert", "input": [[1, 99999]]}, "input[0]"),
        ({"model": "bert", "input": " ".join(["cat"] * 200)}, "input[0]"),
        ({"model": "bert", "input": "cat", "encoding_format": "hex"}, "encoding_format"),
        ({"model": "bert", "input": "cat", "dimensions": 8}, "dimensions"),
        ({"model": "bert", "input": "cat", "user": 5}, "user"),
        ({"model": "bert", "input": "cat", "truncate": True}, "truncate"),
        ({"model": "rank", "input": "cat"}, "model"),
    ],
)
def test_openai_refusals_name_the_field(server: str, body: dict, param: str) -> None:
    response = httpx.post(f"{server}/v1/embeddings", json=body, timeout=60)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == param


def test_unknown_model_is_404(server: str) -> None:
    response = httpx.post(f"{server}/v1/embeddings", json={"model": "nope", "input": "cat"})
    assert response.status_code == 404 and response.json()["error"]["param"] == "model"


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/api/embed", {"model": "bert"}, "input"),
        ("/api/embed", {"model": "bert", "input": "cat", "options": {"top_k": 3}}, "options.top_k"),
        ("/api/embed", {"model": "bert", "input": "cat", "truncate": "no"}, "truncate"),
        ("/api/embed", {"model": "bert", "input": "cat", "keep_alive": "soon"}, "keep_alive"),
        ("/api/embed", {"model": "bert", "input": "cat", "encoding_format": "float"}, "encoding_format"),
        ("/api/embeddings", {"model": "bert", "prompt": ""}, "prompt"),
        ("/api/embeddings", {"model": "bert", "input": "cat"}, "input"),
    ],
)  # fmt: skip
def test_ollama_refusals_name_the_field(server: str, path: str, body: dict, field: str) -> None:
    response = httpx.post(f"{server}{path}", json=body, timeout=60)
    assert response.status_code == 400, response.text
    assert response.json()["error"].startswith(f"{field}:")


def test_keep_alive_zero_unloads_and_ember_stop(server: str, loader: Embedders) -> None:
    def embed(**extra: object) -> None:
        body = {"model": "bert", "input": "cat", **extra}
        assert httpx.post(f"{server}/api/embed", json=body).status_code == 200

    embed(keep_alive=0)  # unloaded once done
    assert "bert" not in [m["name"] for m in httpx.get(f"{server}/api/ps").json()["models"]]
    before = len(loader.loads)
    embed()
    embed(keep_alive="5m")
    assert loader.loads[before:] == ["bert"]  # loaded again once, then kept
    (card,) = [m for m in httpx.get(f"{server}/api/ps").json()["models"] if m["name"] == "bert"]
    expires = datetime.fromisoformat(card["expires_at"].replace("Z", "+00:00")).timestamp()
    assert 240 < expires - time.time() <= 300  # keep_alive "5m"
    unloaded = httpx.post(f"{server}/ember/unload", json={"model": "bert"})
    assert unloaded.status_code == 200 and unloaded.json() == {"unloaded": "bert"}
    assert httpx.post(f"{server}/ember/unload", json={"model": "bert"}).status_code == 404
