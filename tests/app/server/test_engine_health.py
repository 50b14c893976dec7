"""The server over a real EngineThread: hostile text and seeds never kill it; /health tells."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import httpx
import pytest

from ember.app.server.pool import ModelPool
from ember.app.server.security import Guard
from ember.engine.engine_thread import EngineThread
from ember.models.errors import RegistryError
from ember.models.registry.registry import _unknown_message
from tests.app.server.server_harness import running_server
from tests.engine.helpers import make_engine


@pytest.fixture
def engines() -> dict[str, EngineThread]:
    return {}


@pytest.fixture
def server(engines: dict[str, EngineThread]) -> Iterator[str]:
    def load(name: str) -> EngineThread:
        if name != "fake":  # what the registry says about a name it does not know
            raise RegistryError(_unknown_message(name))
        engines[name] = EngineThread(make_engine(window=0))
        return engines[name]

    pool = ModelPool(load, lambda: ["fake"], default_model="fake", max_tokens_cap=64)
    pool.preload("fake")
    with running_server(pool, Guard(bind_host="127.0.0.1")) as url:
        yield url


def _chat(url: str, body: bytes) -> httpx.Response:
    headers = {"content-type": "application/json"}
    return httpx.post(f"{url}/v1/chat/completions", content=body, headers=headers, timeout=30)


def _answers(url: str) -> bool:
    body = b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}'
    reply = _chat(url, body)
    return reply.status_code == 200 and reply.json()["usage"]["completion_tokens"] == 3


def test_lone_surrogates_and_private_use_text_are_answered(server: str) -> None:
    for content in ('"caf\\udce9"', '"\\ud800"', '"' + "\\ue000" * 50 + '"'):
        body = (
            b'{"messages": [{"role": "user", "content": %s}], "max_tokens": 3}' % content.encode()
        )
        reply = _chat(server, body)
        assert reply.status_code == 200, reply.text
    assert _answers(server)


def test_an_unknown_model_named_with_a_lone_surrogate_is_a_clean_404(server: str) -> None:
    body = b'{"model": "caf\\udce9", "messages": [{"role": "user", "content": "x"}]}'
    reply = _chat(server, body)
    # the one unknown-model message names it as repr() writes it (escaped, encodable)
    assert reply.status_code == 404 and "caf\\udce9" in reply.json()["error"]["message"]


def test_out_of_range_seed_is_a_400_naming_it(server: str) -> None:
    reply = _chat(server, b'{"messages": [{"role": "user", "content": "x"}], "seed": -1}')
    assert reply.status_code == 400 and reply.json()["error"]["param"] == "seed"
    assert _answers(server)


def test_health_reports_a_dead_engine_and_requests_fail_fast(
    server: str, engines: dict[str, EngineThread]
) -> None:
    assert httpx.get(f"{server}/health", timeout=30).json() == {"status": "ok", "loaded": ["fake"]}
    engine = engines["fake"].engine

    def die() -> None:
        raise SystemExit("simulated crash")

    engine.step = die  # type: ignore[method-assign]
    body = b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": 3}'
    first = _chat(server, body)
    assert first.status_code == 500 and "engine thread stopped" in first.json()["error"]["message"]
    health = httpx.get(f"{server}/health", timeout=30)
    assert health.status_code == 503
    assert health.json()["unhealthy"]["fake"]["status"] == "dead"
    done = threading.Event()
    result: list[httpx.Response] = []

    def later() -> None:
        result.append(_chat(server, body))
        done.set()

    threading.Thread(target=later, daemon=True).start()
    assert done.wait(timeout=20), "a request to a dead engine hung"
    assert result[0].status_code == 500


def test_an_error_that_echoes_a_lone_surrogate_still_encodes() -> None:
    from ember.app.server.io import error_response

    reply = error_response(404, "model caf\udce9 is unknown")
    assert reply.status_code == 404 and "caf\ufffd" in bytes(reply.body).decode()


def test_the_watchdog_restarts_the_engine_loop_after_a_bug(
    server: str, engines: dict[str, EngineThread], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exception that escapes the engine's serving loop fails the request in flight; the
    loop restarts, /health stays honest and the next chat is answered."""
    from ember.engine.engine import Engine

    fail = threading.Event()
    original = Engine.has_work

    def flaky(self: Engine) -> bool:
        busy = bool(original.fget(self))  # type: ignore[attr-defined]
        if busy and fail.is_set():  # the chat's own request, not the server's token count
            fail.clear()
            raise RuntimeError("simulated bug")
        return busy

    monkeypatch.setattr(Engine, "has_work", property(flaky))
    fail.set()
    first = _chat(server, b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": 3}')
    assert first.status_code == 500 and "simulated bug" in first.json()["error"]["message"]
    assert engines["fake"].restarts == 1
    assert httpx.get(f"{server}/health", timeout=30).status_code == 200
    assert _answers(server)
