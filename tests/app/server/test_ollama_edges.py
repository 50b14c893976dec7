"""Ollama request fields validated at the edge (issue 25): keep_alive read like Ollama (Go
durations, seconds, bounded), tool_calls, model names, stop lists, /api/embed: a 400 naming the
field, never a 500, and /api/ps keeps answering. The real app under uvicorn, a real EngineThread
over the fake runner."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from ember.app.server.durations import FOREVER, keep_alive_s, parse_go_duration
from ember.app.server.errors import RequestInvalid
from ember.app.server.pool import ModelPool
from ember.app.server.security import Guard
from ember.engine.api import EngineOptions
from ember.engine.load import load_engine
from tests.app.server.server_harness import running_server

ASK = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    def load(name: str):
        return load_engine(EngineOptions(model="fake", runner="fake", prefix_disk_bytes=0))

    pool = ModelPool(load, lambda: ["fake"], default_model="fake", max_tokens_cap=64)
    with running_server(pool, Guard(bind_host="127.0.0.1")) as url:
        yield url


def _chat(url: str, **fields: object) -> httpx.Response:
    body = {"model": "fake", "messages": ASK, "stream": False, "options": {"num_predict": 2}}
    return httpx.post(f"{url}/api/chat", json=body | fields, timeout=60)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("5m", 300), ("1h30m", 5400), ("1.5h", 5400), (".5s", 0.5), ("+2m", 120), ("0", 0),
     ("300ms", 0.3), ("1m30s500ms", 90.5), ("-1s", -1), ("2\u00b5s", 2e-6)],
)  # fmt: skip
def test_go_durations_read_like_go(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["--5m", "\u00b2m", "1.2.3s", "5..m", "", "5", "m", "1e5s",
                                  "5 m", "\u0665m", "1d", ".s", "-", "5m" * 40])  # fmt: skip
def test_what_go_refuses_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_go_duration(text)


def test_keep_alive_is_bounded_and_negative_means_forever() -> None:
    assert keep_alive_s("5m") == 300 and keep_alive_s("300") == 300 and keep_alive_s(7) == 7
    for forever in (-1, "-1", "-5m", 1e12, 1e300, float("inf"), "99999999h"):
        assert keep_alive_s(forever) == FOREVER
    bad_values: tuple[object, ...] = (float("nan"), True, [], {}, "--5m")
    for bad in bad_values:
        with pytest.raises(RequestInvalid, match="keep_alive"):
            keep_alive_s(bad)


@pytest.mark.parametrize("value", ["--5m", "\u00b2m", "1.2.3s", "5..m", "soon", True, [1]])
def test_an_unreadable_keep_alive_is_a_400_on_chat_generate_and_embed(
    server: str, value: object
) -> None:
    for path, body in (
        ("/api/chat", {"model": "fake", "messages": ASK, "stream": False}),
        ("/api/generate", {"model": "fake", "prompt": "hi", "stream": False}),
        ("/api/embed", {"model": "fake", "input": "hi"}),
    ):
        reply = httpx.post(f"{server}{path}", json=body | {"keep_alive": value}, timeout=60)
        assert reply.status_code == 400, (path, reply.text)
        assert reply.json()["error"].startswith("keep_alive")


def test_a_huge_keep_alive_never_breaks_api_ps(server: str) -> None:
    for value in (1e12, 1e300, "99999999h"):
        assert _chat(server, keep_alive=value).status_code == 200
        assert httpx.get(f"{server}/api/ps", timeout=30).status_code == 200
    raw = b'{"model": "fake", "prompt": "", "keep_alive": Infinity}'  # Python's json reads it
    headers = {"content-type": "application/json"}
    reply = httpx.post(f"{server}/api/generate", content=raw, headers=headers, timeout=60)
    assert reply.status_code == 200
    ps = httpx.get(f"{server}/api/ps", timeout=30)
    assert ps.status_code == 200 and ps.json()["models"][0]["expires_at"].startswith("20")


@pytest.mark.parametrize("calls", [5, True, "x", {"function": {}}, [5], [{"function": "f"}],
                                   [{"function": {"name": "f", "arguments": 3}}]])  # fmt: skip
def test_tool_calls_of_the_wrong_type_are_a_400(server: str, calls: object) -> None:
    messages = [{"role": "assistant", "content": "", "tool_calls": calls}, *ASK]
    reply = _chat(server, messages=messages)
    assert reply.status_code == 400 and reply.json()["error"].startswith("messages[0].tool_calls")


def test_a_model_with_a_lone_surrogate_is_a_400_naming_it(server: str) -> None:
    headers = {"content-type": "application/json"}
    for path, rest in (
        ("/api/chat", b'"stream": false, "messages": [{"role": "user", "content": "hi"}]'),
        ("/api/generate", b'"stream": false, "prompt": "hi"'),
        ("/api/embed", b'"input": "hi"'),
    ):
        body = b'{"model": "g\\ud800", %s}' % rest
        reply = httpx.post(f"{server}{path}", content=body, headers=headers, timeout=60)
        assert reply.status_code == 400, (path, reply.text)
        assert reply.json()["error"].startswith("model")


def test_more_than_16_stop_strings_are_refused_not_dropped(server: str) -> None:
    stops = [f"s{i}" for i in range(17)]
    reply = _chat(server, options={"num_predict": 2, "stop": stops})
    assert reply.status_code == 400 and reply.json()["error"].startswith("options.stop")
    assert _chat(server, options={"num_predict": 2, "stop": stops[:16]}).status_code == 200
