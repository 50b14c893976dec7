"""llama-server's utility routes on a scripted backend: /infill's translation onto the FIM
request (and Ollama's suffix on the same path), /metrics counting every API, bad input."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from ember.app.server.llamaserver.metrics import ServerMetrics
from ember.app.server.pool import ModelPool
from ember.app.server.security import Guard
from tests.app.scripted_backend import ScriptedBackend
from tests.app.server.server_harness import running_server


class Loader:
    def __init__(self) -> None:
        self.backends: list[ScriptedBackend] = []

    def __call__(self, name: str) -> ScriptedBackend:
        self.backends.append(ScriptedBackend(name, ["x = ", "1", "\n"]))
        return self.backends[-1]


@pytest.fixture
def loader() -> Loader:
    return Loader()


def _serve(loader: Loader, metrics: ServerMetrics | None) -> Iterator[str]:
    load = metrics.metered(loader) if metrics else loader
    pool = ModelPool(load, lambda: ["tiny"], default_model="tiny", max_tokens_cap=512)
    with running_server(pool, Guard(bind_host="127.0.0.1"), metrics=metrics) as url:
        yield url


@pytest.fixture
def url(loader: Loader) -> Iterator[str]:
    yield from _serve(loader, None)


def test_infill_maps_onto_the_fim_request(url: str, loader: Loader) -> None:
    body = {
        "input_prefix": "def f():\n    ", "input_suffix": "\n    return x\n", "prompt": "x",
        "input_extra": [], "n_predict": 20, "temperature": 0, "cache_prompt": True,
    }  # fmt: skip
    reply = httpx.post(f"{url}/infill", json=body, timeout=30).json()
    assert reply["content"] == "x = 1\n" and reply["stop"] is True
    assert reply["stop_type"] == "eos" and reply["tokens_predicted"] == 3
    sent = loader.backends[0].requests[-1]
    assert (sent.prompt, sent.suffix) == ("def f():\n    x", "\n    return x\n")
    assert sent.sampling.max_tokens == 20
    with httpx.stream("POST", f"{url}/infill", json=body | {"stream": True}, timeout=30) as r:
        events = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: ")]
    assert "".join(e["content"] for e in events) == "x = 1\n"
    assert [e["stop"] for e in events] == [False, False, False, True]


def test_ollama_suffix_takes_the_same_path(url: str, loader: Loader) -> None:
    body = {"model": "tiny", "prompt": "def f(", "suffix": "):", "stream": False}
    reply = httpx.post(f"{url}/api/generate", json=body, timeout=30)
    assert reply.status_code == 200, reply.text
    sent = loader.backends[0].requests[-1]
    assert (sent.prompt, sent.suffix, sent.messages) == ("def f(", "):", None)


@pytest.mark.parametrize(
    ("route", "body", "param"),
    [
        ("/infill", {"input_prefix": 3}, "input_prefix"),
        ("/infill", {"input_prefix": "a", "input_extra": [{"text": "x"}]}, "input_extra"),
        ("/infill", {"input_prefix": "a", "n_predict": -1}, "n_predict"),
        ("/infill", {"input_prefix": "a", "cache_prompt": False}, "cache_prompt"),
        ("/infill", {"input_prefix": "a", "bogus": 1}, "bogus"),
        ("/tokenize", {"content": 5}, "content"),
        ("/tokenize", {"content": "a", "with_pieces": "yes"}, "with_pieces"),
        ("/tokenize", {"content": "a", "extra": 1}, "extra"),
        ("/detokenize", {"tokens": [1, -2]}, "tokens[1]"),
        ("/detokenize", {"tokens": "12"}, "tokens"),
        ("/apply-template", {"messages": []}, "messages"),
    ],
)  # fmt: skip
def test_bad_input_names_the_field(url: str, route: str, body: dict, param: str) -> None:
    response = httpx.post(f"{url}{route}", json=body, timeout=30)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == param


def test_text_routes_need_a_local_engine(url: str) -> None:
    response = httpx.post(f"{url}/tokenize", json={"content": "a"}, timeout=30)
    assert response.status_code == 501 and "tokenizer" in response.json()["error"]["message"]


def test_metrics_off_by_default(url: str) -> None:
    response = httpx.get(f"{url}/metrics", timeout=30)
    assert response.status_code == 501 and "--metrics" in response.text


def test_metrics_count_every_api(loader: Loader) -> None:
    metrics = ServerMetrics()
    for url in _serve(loader, metrics):
        httpx.post(f"{url}/infill", json={"input_prefix": "a"}, timeout=30)
        chat = {"messages": [{"role": "user", "content": "hi"}]}
        httpx.post(f"{url}/v1/chat/completions", json=chat, timeout=30)
        httpx.post(f"{url}/v1/responses", json={"input": "hi", "store": False}, timeout=30)
        text = httpx.get(f"{url}/metrics", timeout=30).text
    values = dict(line.split(" ") for line in text.splitlines() if not line.startswith("#"))
    assert values["ember:requests_total"] == "3"
    assert values["llamacpp:tokens_predicted_total"] == "9"  # 3 tokens each
    assert values["llamacpp:prompt_tokens_total"] == "9"
    assert "# TYPE llamacpp:kv_cache_usage_ratio gauge" in text
