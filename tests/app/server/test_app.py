"""The OpenAI-compatible server, driven by the official openai client and raw HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING

import httpx
import pytest

from ember.app.server.pool import ModelPool
from ember.app.server.security import Guard
from ember.models.errors import RegistryError
from tests.app.scripted_backend import ScriptedBackend
from tests.app.server.server_harness import running_server
from tests.waiting import wait_until

if TYPE_CHECKING:
    import openai
    from openai.types.chat import ChatCompletionMessageParam

WORDS = ["Hello", ",", " world", "!"]


class Loader:
    """Loads ScriptedBackends by name; unknown names fail like the registry does."""

    def __init__(self, known: tuple[str, ...] = ("tiny", "other"), delay_s: float = 0.0) -> None:
        self.known = known
        self.delay_s = delay_s
        self.loaded: dict[str, ScriptedBackend] = {}

    def __call__(self, name: str) -> ScriptedBackend:
        if name not in self.known:
            raise RegistryError(f"model {name!r} not found: see `ember list`")
        backend = ScriptedBackend(name, WORDS * (250 if self.delay_s else 1), self.delay_s)
        self.loaded[name] = backend
        return backend


@pytest.fixture
def loader() -> Loader:
    return Loader()


@pytest.fixture
def server(loader: Loader) -> Iterator[str]:
    pool = ModelPool(loader, lambda: list(loader.known), default_model="tiny", max_tokens_cap=512)
    with running_server(pool, Guard(bind_host="127.0.0.1")) as url:
        yield url


def _client(url: str, key: str = "unused") -> openai.OpenAI:
    import openai

    return openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0, timeout=30)


def test_chat_completion_with_openai_client(server: str, loader: Loader) -> None:
    reply = _client(server).chat.completions.create(
        model="tiny",
        messages=[{"role": "user", "content": "hi"}],
        temperature=0,
        seed=7,
        stop=["\n\n"],
        max_tokens=50,
        top_p=0.9,
    )
    assert reply.choices[0].message.content == "Hello, world!"
    assert reply.choices[0].finish_reason == "stop"
    assert reply.usage is not None and reply.usage.completion_tokens == 4
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + 4
    sent = loader.loaded["tiny"].requests[0]
    assert sent.messages is not None and sent.messages[0].content == "hi"
    assert (sent.sampling.temperature, sent.sampling.seed, sent.sampling.top_p) == (0.0, 7, 0.9)
    assert sent.sampling.stop == ("\n\n",) and sent.sampling.max_tokens == 50


def test_streamed_chat_completion(server: str) -> None:
    stream = _client(server).chat.completions.create(
        model="tiny",
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Hello, world!"
    finishes = [
        c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason
    ]
    assert finishes == ["stop"]
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 4


def test_plain_completion_and_length_finish(server: str) -> None:
    reply = _client(server).completions.create(model="tiny", prompt="Once", max_tokens=2)
    assert reply.choices[0].text == "Hello,"
    assert reply.choices[0].finish_reason == "length"


def test_streamed_plain_completion(server: str) -> None:
    stream = _client(server).completions.create(model="tiny", prompt="Once", stream=True)
    assert "".join(c.choices[0].text for c in stream if c.choices) == "Hello, world!"


def test_default_model_and_listing(server: str) -> None:
    client = _client(server)
    assert {m.id for m in client.models.list()} == {"tiny", "other"}
    reply = httpx.post(
        f"{server}/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "x"}]},
        timeout=30,
    )
    assert reply.status_code == 200 and reply.json()["model"] == "tiny"
    assert httpx.get(f"{server}/health", timeout=30).json() == {"status": "ok", "loaded": ["tiny"]}


def test_unknown_model_is_404_naming_it(server: str) -> None:
    import openai

    with pytest.raises(openai.NotFoundError, match="nope"):
        _client(server).chat.completions.create(
            model="nope", messages=[{"role": "user", "content": "x"}]
        )


def test_on_demand_load_unloads_idle_model(server: str, loader: Loader) -> None:
    client = _client(server)
    client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "x"}])
    client.chat.completions.create(model="other", messages=[{"role": "user", "content": "x"}])
    assert loader.loaded["tiny"].closed and not loader.loaded["other"].closed


@pytest.mark.parametrize(
    ("patch", "param"),
    [
        ({"temperature": "hot"}, "temperature"),
        ({"temperature": -1}, "temperature"),
        ({"max_tokens": -5}, "max_tokens"),
        ({"max_tokens": 10**12}, "max_tokens"),
        ({"max_tokens": True}, "max_tokens"),
        ({"top_p": 0}, "top_p"),
        ({"seed": 1.5}, "seed"),
        ({"n": 17}, "n"),  # n up to 16 is served
        ({"stop": [1, 2]}, "stop"),
        ({"stream": "yes"}, "stream"),
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "wizard", "content": "x"}]}, "messages[0].role"),
        ({"messages": [{"role": "user", "content": 42}]}, "messages[0].content"),
        ({"model": 7}, "model"),
    ],
)
def test_bad_parameters_are_400_with_reason(
    server: str, patch: dict[str, object], param: str
) -> None:
    body = {"model": "tiny", "messages": [{"role": "user", "content": "x"}]} | patch
    reply = httpx.post(f"{server}/v1/chat/completions", json=body, timeout=30)
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"]["param"] == param


def test_malformed_json_is_400(server: str) -> None:
    reply = httpx.post(f"{server}/v1/chat/completions", content=b"{not json", timeout=30)
    assert reply.status_code == 400 and "JSON" in reply.json()["error"]["message"]


def test_oversized_body_is_413(loader: Loader) -> None:
    pool = ModelPool(loader, lambda: ["tiny"], default_model="tiny")
    with running_server(pool, Guard(bind_host="127.0.0.1", max_body_bytes=1000)) as url:
        body = {"messages": [{"role": "user", "content": "x" * 5000}]}
        assert httpx.post(f"{url}/v1/chat/completions", json=body, timeout=30).status_code == 413

        def chunked() -> Iterator[bytes]:  # no Content-Length: counted while reading
            yield json.dumps(body).encode()

        reply = httpx.post(f"{url}/v1/chat/completions", content=chunked(), timeout=30)
        assert reply.status_code == 413


def test_dns_rebinding_host_and_cross_origin_refused(server: str) -> None:
    body = {"messages": [{"role": "user", "content": "x"}]}
    url = f"{server}/v1/chat/completions"
    evil_host = httpx.post(url, json=body, headers={"Host": "evil.example:8080"}, timeout=30)
    assert evil_host.status_code == 403 and "Host" in evil_host.json()["error"]["message"]
    evil_origin = httpx.post(url, json=body, headers={"Origin": "https://evil.example"}, timeout=30)
    assert evil_origin.status_code == 403
    port = server.rsplit(":", 1)[1]
    ok = httpx.post(url, json=body, headers={"Origin": f"http://localhost:{port}"}, timeout=30)
    assert ok.status_code == 200


def test_api_key_required_and_checked(loader: Loader) -> None:
    import openai

    pool = ModelPool(loader, lambda: ["tiny"], default_model="tiny")
    with running_server(pool, Guard(bind_host="127.0.0.1", api_key="s3cret")) as url:
        msgs: list[ChatCompletionMessageParam] = [{"role": "user", "content": "x"}]
        with pytest.raises(openai.AuthenticationError):
            _client(url, key="wrong").chat.completions.create(model="tiny", messages=msgs)
        reply = httpx.post(f"{url}/v1/chat/completions", json={"messages": msgs}, timeout=30)
        assert reply.status_code == 401
        assert _client(url, key="s3cret").chat.completions.create(model="tiny", messages=msgs)
        assert httpx.get(f"{url}/health", timeout=30).status_code == 200


def test_client_disconnect_aborts_request() -> None:
    loader = Loader(delay_s=0.02)  # 1000 words at 50 words/s: far longer than the test
    pool = ModelPool(loader, lambda: ["tiny"], default_model="tiny")
    with running_server(pool, Guard(bind_host="127.0.0.1")) as url:
        body = {"messages": [{"role": "user", "content": "x"}], "stream": True}
        with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=30) as reply:
            lines = reply.iter_lines()
            got = [next(lines) for _ in range(6)]
            assert any("Hello" in line for line in got)
        handle = loader.loaded["tiny"].handles[0]
        wait_until(lambda: handle.aborted, "the disconnect aborts the request", 20)
        assert handle.result().reason == "abort"


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}]}),
        ("/v1/completions", {"prompt": "x"}),
        ("/api/chat", {"messages": [{"role": "user", "content": "x"}], "stream": False}),
        ("/api/generate", {"prompt": "x", "stream": False}),
    ],
)
def test_a_non_streamed_request_is_aborted_when_its_client_goes_away(
    path: str, body: dict[str, object]
) -> None:
    """Even while no event comes (a long prefill: here 60 s before the first word), the
    request stops as soon as its client disconnects (issue 25: Ollama's non-streamed routes
    went on computing)."""
    loader = Loader(delay_s=60)
    pool = ModelPool(loader, lambda: ["tiny"], default_model="tiny")
    with running_server(pool, Guard(bind_host="127.0.0.1")) as url:
        with pytest.raises(httpx.TimeoutException):
            httpx.post(f"{url}{path}", json={"model": "tiny", **body}, timeout=1)
        handle = loader.loaded["tiny"].handles[0]
        wait_until(lambda: handle.aborted, f"the early disconnect on {path} aborts", 10)
        assert handle.result().reason == "abort"
