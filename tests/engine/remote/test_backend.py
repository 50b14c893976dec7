"""RemoteBackend against a real HTTP server on 127.0.0.1 that streams, stalls, drops and errs."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from ember.engine.api import (
    ChatMessage,
    EngineOptions,
    Finished,
    GenerationRequest,
    SamplingParams,
    TextDelta,
)
from ember.engine.errors import EngineError
from ember.engine.remote.backend import RemoteBackend, RemoteConfig
from tests.engine.remote.remote_server import RemoteTestServer, serve

KEY = "sk-test-123"


@pytest.fixture
def server() -> Iterator[RemoteTestServer]:
    with serve(api_key=KEY) as running:
        yield running


def backend(server: RemoteTestServer, model: str, **kwargs: object) -> RemoteBackend:
    config = RemoteConfig(server.url, model, api_key=kwargs.pop("api_key", KEY), **kwargs)  # type: ignore[arg-type]
    return RemoteBackend(config)


def chat(text: str = "Hi", **sampling: object) -> GenerationRequest:
    return GenerationRequest(
        messages=(ChatMessage("user", text),),
        sampling=SamplingParams(**sampling),  # type: ignore[arg-type]
    )


def events(backend: RemoteBackend, request: GenerationRequest) -> tuple[list[str], Finished]:
    deltas: list[str] = []
    for event in backend.submit(request):
        if isinstance(event, TextDelta):
            deltas.append(event.text)
        else:
            return deltas, event
    raise AssertionError("stream ended without Finished")


def test_streams_text_and_usage(server: RemoteTestServer) -> None:
    deltas, done = events(backend(server, "ok"), chat())
    assert deltas == ["Hello", ", ", "world", "!"]
    assert (done.reason, done.text, done.error) == ("stop", "Hello, world!", "")
    assert done.stats.runner == "remote"
    assert (done.stats.prompt_tokens, done.stats.generated_tokens) == (7, 4)


def test_length_finish_and_missing_done_line(server: RemoteTestServer) -> None:
    assert events(backend(server, "long"), chat())[1].reason == "length"
    assert events(backend(server, "nodone"), chat())[1].reason == "stop"


def test_sampling_parameters_reach_the_server(server: RemoteTestServer) -> None:
    request = chat(temperature=0.5, top_p=0.9, top_k=20, max_tokens=33, stop=("END",), seed=7)
    events(backend(server, "ok"), request)
    sent = server.requests[-1]
    assert sent["path"] == "/v1/chat/completions" and sent["stream"] is True
    assert sent["messages"] == [{"role": "user", "content": "Hi"}]
    expected = {"temperature": 0.5, "top_p": 0.9, "top_k": 20, "max_tokens": 33, "seed": 7}
    assert {k: sent[k] for k in expected} == expected
    assert sent["stop"] == ["END"] and "min_p" not in sent and "repeat_penalty" not in sent


def test_raw_prompts_use_the_completions_endpoint(server: RemoteTestServer) -> None:
    _, done = events(backend(server, "ok"), GenerationRequest(prompt="Once upon"))
    assert done.text == "Hello, world!"
    assert server.requests[-1]["path"] == "/v1/completions"
    assert server.requests[-1]["prompt"] == "Once upon"


def test_context_ids_are_refused_not_dropped(server: RemoteTestServer) -> None:
    request = GenerationRequest(prompt="Once upon", context_ids=(1, 2))
    _, done = events(backend(server, "ok"), request)
    assert done.reason == "error" and "context_ids" in done.error
    assert not server.requests  # nothing was sent without the context


def test_wrong_api_key_is_a_clear_error(server: RemoteTestServer) -> None:
    _, done = events(backend(server, "ok", api_key="wrong"), chat())
    assert done.reason == "error" and "refused the API key (401)" in done.error


def test_api_key_comes_from_the_environment(
    server: RemoteTestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("EMBER_REMOTE_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    options = EngineOptions(model="ok", runner="remote", remote_url=server.url + "/v1")
    assert events(RemoteBackend.from_options(options), chat())[1].reason == "stop"
    monkeypatch.setenv("EMBER_REMOTE_API_KEY", "wrong")
    assert events(RemoteBackend.from_options(options), chat())[1].reason == "error"


def test_unknown_model_and_server_error(server: RemoteTestServer) -> None:
    _, missing = events(backend(server, "nope"), chat())
    assert missing.reason == "error" and "'nope'" in missing.error and "404" in missing.error
    _, failed = events(backend(server, "e500"), chat())
    assert failed.reason == "error" and "500" in failed.error and "internal failure" in failed.error


@pytest.mark.parametrize(
    ("model", "kept", "why"),
    [
        ("drop", "Hello, ", "closed the connection mid-reply"),
        ("malformed", "Hello", "malformed chunk"),
        ("midstream", "Hello", "out of memory"),
    ],
)
def test_broken_streams_keep_the_partial_reply(
    server: RemoteTestServer, model: str, kept: str, why: str
) -> None:
    deltas, done = events(backend(server, model), chat())
    assert done.reason == "error" and why in done.error
    assert done.text == kept == "".join(deltas)


def test_a_stall_times_out_with_the_partial_reply(server: RemoteTestServer) -> None:
    _, done = events(backend(server, "stall", read_timeout_s=0.5), chat())
    assert done.reason == "error" and "stalled" in done.error
    assert done.text == "Hello"


def test_abort_during_a_stall_ends_at_once(server: RemoteTestServer) -> None:
    handle = backend(server, "stall").submit(chat())  # read timeout 120 s: abort must not wait
    stream = iter(handle)
    first = next(stream)
    assert isinstance(first, TextDelta) and first.text == "Hello"
    assert server.stalled.wait(10)
    handle.abort()
    done = handle.result()
    assert (done.reason, done.text) == ("abort", "Hello")


def test_unreachable_server_is_a_clear_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, never listening: connections are refused
        remote = RemoteBackend(RemoteConfig(f"http://127.0.0.1:{port}", "ok"))
        _, done = events(remote, chat())
    assert done.reason == "error" and "cannot connect" in done.error


def test_models_tokens_and_features(server: RemoteTestServer) -> None:
    remote = backend(server, "ok")
    assert "ok" in remote.list_models()
    assert remote.count_tokens(GenerationRequest(prompt="one two three")) == 3
    assert remote.info.runner == "remote"
    assert remote.info.features and not any(remote.info.features.values())
    with pytest.raises(EngineError, match="refused the API key"):
        backend(server, "ok", api_key="").list_models()


def test_bad_urls_are_refused() -> None:
    with pytest.raises(EngineError, match="must be http"):
        RemoteConfig("ftp://x", "m")
    with pytest.raises(EngineError, match="needs a server URL"):
        RemoteBackend.from_options(EngineOptions(model="m", runner="remote"))


def test_load_engine_picks_the_remote_backend(
    server: RemoteTestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ember.engine.load import load_engine

    monkeypatch.setenv("EMBER_REMOTE_API_KEY", KEY)
    by_flag = load_engine(EngineOptions(model="ok", remote_url=server.url))
    by_url = load_engine(EngineOptions(model=server.url + "/v1"))
    try:
        assert isinstance(by_flag, RemoteBackend) and isinstance(by_url, RemoteBackend)
        assert events(by_flag, chat())[1].text == "Hello, world!"
        assert by_url.info.device == server.url
    finally:
        by_flag.close()
        by_url.close()


def test_a_local_model_has_no_remote_config() -> None:
    from ember.engine.remote.backend import remote_config

    assert remote_config(EngineOptions(model="my-server")) is None  # app resolves registry names
    assert remote_config(EngineOptions(model="x", runner="llama.cpp")) is None


def test_logprobs_are_asked_for_and_a_server_without_them_is_an_error(
    server: RemoteTestServer,
) -> None:
    _, done = events(backend(server, "ok"), chat(logprobs=True, top_logprobs=3))
    sent = server.requests[-1]
    assert (sent["logprobs"], sent["top_logprobs"]) == (True, 3)
    assert done.reason == "error" and "sent no logprobs" in done.error
    assert done.text == "Hello, world!"  # the reply so far is kept
    events(backend(server, "ok"), chat())
    assert "logprobs" not in server.requests[-1]
