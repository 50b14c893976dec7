"""logit_bias through the real app and a real engine over the fake runner (its byte-level
tokenizer: a character's token id is its byte + 4): banning the greedy first token, in each of
the forms OpenAI and llama-server accept, changes the first token."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from ember.app.server.pool import ModelPool
from ember.app.server.security import Guard
from ember.engine.api import EngineOptions
from ember.engine.load import load_engine
from ember.engine.runners.fake import FakeTokenizer
from tests.app.server.server_harness import running_server


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    def load(name: str):
        options = EngineOptions(model="fake", runner="fake", ctx=512, prefix_disk_bytes=0)
        return load_engine(options)

    pool = ModelPool(load, lambda: ["fake"], default_model="fake", max_tokens_cap=64)
    with running_server(pool, Guard(bind_host="127.0.0.1")) as url:
        yield url


def _first(server: str, path: str, bias: Any = None) -> str:
    body: dict[str, Any] = {"model": "fake", "max_tokens": 3, "temperature": 0}
    if path == "/v1/completions":
        body["prompt"] = "Tell me"
    else:
        body["messages"] = [{"role": "user", "content": "Tell me"}]
    if bias is not None:
        body["logit_bias"] = bias
    reply = httpx.post(f"{server}{path}", json=body, timeout=60)
    assert reply.status_code == 200, reply.text
    choice = reply.json()["choices"][0]
    text = choice["text"] if path == "/v1/completions" else choice["message"]["content"]
    assert text
    return str(text)[0]


def _id(char: str) -> int:
    (token,) = FakeTokenizer().encode(char)
    return token


@pytest.mark.parametrize("path", ["/v1/completions", "/v1/chat/completions"])
def test_banning_the_greedy_first_token_changes_it_in_every_form(server: str, path: str) -> None:
    """The fake model's raw logits are random, so two tokens are lifted far above the rest:
    greedy picks one of them; banned (in each form), the other comes first."""
    assert _first(server, path, {_id("Q"): 100}) == "Q"
    assert _first(server, path, [["R", 100]]) == "R"
    first = _first(server, path, {str(_id("Q")): 100, str(_id("R")): 100})
    other = "R" if first == "Q" else "Q"
    token, lift = _id(first), [_id(other), 100]
    for bias in ({str(token): -100, str(lift[0]): 100}, {token: False, lift[0]: 100},
                 [[token, -100], lift], [[token, False], lift], [[first, -100], lift]):  # fmt: skip
        assert _first(server, path, bias) == other, bias


def test_bad_logit_bias_is_a_400_naming_it(server: str) -> None:
    url = f"{server}/v1/completions"
    for bias, param in (({"5": "x"}, "logit_bias['5']"), ({"999999": 1}, None),
                        ("x", "logit_bias")):  # fmt: skip
        reply = httpx.post(url, json={"prompt": "a", "logit_bias": bias}, timeout=60)
        assert reply.status_code == 400, reply.text
        error = reply.json()["error"]
        assert "logit_bias" in f"{error['param']} {error['message']}"
        if param:
            assert error["param"] == param
