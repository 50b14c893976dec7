"""logprobs / top_logprobs through the real server and engine (EngineThread over the fake
runner) with the official openai client: both shapes, streamed and whole, and the 400s."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from ember.app.server.pool import ModelPool
from ember.app.server.security import Guard
from ember.engine.api import EngineOptions, Finished, TextDelta
from ember.engine.load import load_engine
from ember.models.errors import RegistryError
from tests.app.server.server_harness import running_server

ASK = [{"role": "user", "content": "Say something."}]


def _load(name: str):
    if name == "fake":
        return load_engine(EngineOptions(model="fake", runner="fake", prefix_disk_bytes=0))
    raise RegistryError(f"model {name!r} not found")


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    pool = ModelPool(_load, lambda: ["fake"], default_model="fake", max_tokens_cap=512)
    with running_server(pool, Guard(bind_host="127.0.0.1")) as url:
        yield url


def _client(url: str):
    import openai

    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=60)


def _check_chat_entries(content: list, top: int) -> None:
    for entry in content:
        assert entry.logprob <= 0.0 and len(entry.top_logprobs) == top
        values = [t.logprob for t in entry.top_logprobs]
        assert values == sorted(values, reverse=True)
        if top:
            assert entry.logprob <= values[0] + 1e-6
        assert entry.token == bytes(entry.bytes).decode("utf-8", "replace")


def test_chat_logprobs_whole_and_streamed_agree(server: str) -> None:
    args = dict(model="fake", messages=ASK, max_tokens=12, temperature=0, seed=1)
    reply = _client(server).chat.completions.create(**args, logprobs=True, top_logprobs=3)
    choice = reply.choices[0]
    assert choice.logprobs is not None and choice.logprobs.content
    content = choice.logprobs.content
    assert len(content) == reply.usage.completion_tokens
    _check_chat_entries(content, 3)
    # temperature 0 without penalties: the chosen token is the most likely one
    assert all(e.logprob == e.top_logprobs[0].logprob for e in content)
    joined = b"".join(bytes(e.bytes) for e in content)
    assert joined.decode("utf-8", "replace") == choice.message.content
    stream = _client(server).chat.completions.create(
        **args, logprobs=True, top_logprobs=3, stream=True
    )
    streamed, text = [], ""
    for chunk in stream:
        if not chunk.choices:
            continue
        c = chunk.choices[0]
        if c.logprobs is not None and c.logprobs.content:
            streamed += c.logprobs.content
        text += c.delta.content or ""
    assert text == choice.message.content
    assert [(e.token, e.logprob, e.bytes) for e in streamed] == [
        (e.token, e.logprob, e.bytes) for e in content
    ]
    plain = _client(server).chat.completions.create(**args)
    assert plain.choices[0].logprobs is None
    assert plain.choices[0].message.content == choice.message.content


def test_chat_logprobs_without_alternatives(server: str) -> None:
    reply = _client(server).chat.completions.create(
        model="fake", messages=ASK, max_tokens=5, temperature=0, logprobs=True
    )
    content = reply.choices[0].logprobs.content
    assert len(content) == 5 and all(e.top_logprobs == [] for e in content)
    off = _client(server).chat.completions.create(
        model="fake", messages=ASK, max_tokens=5, logprobs=False, top_logprobs=0
    )
    assert off.choices[0].logprobs is None  # zero alternatives without logprobs: off


def test_completion_logprobs_legacy_shape(server: str) -> None:
    args = dict(model="fake", prompt="Once upon a time", max_tokens=10, temperature=0)
    reply = _client(server).completions.create(**args, logprobs=2)
    lp = reply.choices[0].logprobs
    assert lp is not None and len(lp.tokens) == len(lp.token_logprobs) == 10
    assert len(lp.top_logprobs) == len(lp.text_offset) == 10
    assert lp.text_offset == sorted(lp.text_offset) and lp.text_offset[0] == 0
    for token, value, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs, strict=True):
        assert value <= 0.0 and token in top and top[token] == value
        assert 1 <= len(top) <= 3 and max(top.values()) == value  # greedy: the top one
    stream = _client(server).completions.create(**args, logprobs=2, stream=True)
    tokens, values, offsets = [], [], []
    for chunk in stream:
        part = chunk.choices[0].logprobs if chunk.choices else None
        if part is not None:
            tokens += part.tokens
            values += part.token_logprobs
            offsets += part.text_offset
    assert (tokens, values, offsets) == (lp.tokens, lp.token_logprobs, lp.text_offset)


@pytest.mark.parametrize(
    ("path", "patch", "param"),
    [
        ("chat/completions", {"logprobs": 1}, "logprobs"),
        ("chat/completions", {"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
        ("chat/completions", {"logprobs": True, "top_logprobs": -1}, "top_logprobs"),
        ("chat/completions", {"logprobs": True, "top_logprobs": "3"}, "top_logprobs"),
        ("chat/completions", {"top_logprobs": 2}, "top_logprobs"),
        ("chat/completions", {"logprobs": False, "top_logprobs": 2}, "top_logprobs"),
        ("completions", {"logprobs": 6}, "logprobs"),
        ("completions", {"logprobs": True}, "logprobs"),
        ("completions", {"logprobs": -1}, "logprobs"),
        ("completions", {"logprobs": 1, "top_logprobs": 1}, "top_logprobs"),
    ],
)
def test_out_of_range_logprobs_are_400_naming_the_field(
    server: str, path: str, patch: dict[str, object], param: str
) -> None:
    body = {"model": "fake", "max_tokens": 2}
    body |= {"messages": ASK} if path.startswith("chat") else {"prompt": "hi"}
    reply = httpx.post(f"{server}/v1/{path}", json=body | patch, timeout=30)
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"]["param"] == param


def test_remote_backend_forwards_logprobs_to_an_ember_server(server: str) -> None:
    """engine/remote over this server: the same values as asking the server directly."""
    from ember.engine.api import ChatMessage, GenerationRequest, SamplingParams
    from ember.engine.remote.backend import RemoteBackend, RemoteConfig

    direct = _client(server).chat.completions.create(
        model="fake", messages=ASK, max_tokens=8, temperature=0, logprobs=True, top_logprobs=2
    )
    sampling = SamplingParams(max_tokens=8, logprobs=True, top_logprobs=2)
    request = GenerationRequest(
        messages=(ChatMessage("user", ASK[0]["content"]),), sampling=sampling
    )
    backend = RemoteBackend(RemoteConfig(server, "fake"))
    try:
        events = list(backend.submit(request))
        raw = backend.submit(
            GenerationRequest(prompt="Once", sampling=SamplingParams(max_tokens=4, logprobs=True))
        ).result()
    finally:
        backend.close()
    final = events[-1]
    assert isinstance(final, Finished) and final.reason == "length", final
    expected = direct.choices[0].logprobs.content
    assert [(lp.token, lp.logprob) for lp in final.logprobs] == [
        (bytes(e.bytes), e.logprob) for e in expected
    ]
    assert [[t.logprob for t in lp.top] for lp in final.logprobs] == [
        [t.logprob for t in e.top_logprobs] for e in expected
    ]
    streamed = [lp for e in events if isinstance(e, TextDelta) for lp in e.logprobs]
    assert tuple(streamed) == final.logprobs
    assert raw.reason == "length" and len(raw.logprobs) == 4  # /v1/completions, legacy shape


def test_ollama_chat_and_generate_logprobs(server: str) -> None:
    import ollama

    client = ollama.Client(host=server)
    options = {"temperature": 0, "num_predict": 8}
    whole = client.chat(
        model="fake", messages=ASK, options=options, logprobs=True, top_logprobs=2, stream=False
    )
    entries = whole["logprobs"]
    assert len(entries) == whole["eval_count"] == 8
    for entry in entries:
        tops = [t["logprob"] for t in entry["top_logprobs"]]
        assert len(tops) == 2 and tops == sorted(tops, reverse=True)
        assert entry["logprob"] == tops[0] <= 0.0
    parts = client.chat(
        model="fake", messages=ASK, options=options, logprobs=True, top_logprobs=2, stream=True
    )
    streamed = [e for part in parts for e in (part.get("logprobs") or [])]
    assert [(e["token"], e["logprob"]) for e in streamed] == [
        (e["token"], e["logprob"]) for e in entries
    ]
    made = client.generate(model="fake", prompt="Once", options=options, logprobs=True)
    assert len(made["logprobs"]) == 8 and all(
        e["top_logprobs"] in ([], None) for e in made["logprobs"]
    )
    plain = client.chat(model="fake", messages=ASK, options=options, stream=False)
    assert plain.get("logprobs") is None


@pytest.mark.parametrize(
    ("patch", "param"),
    [({"logprobs": 1}, "logprobs"), ({"logprobs": True, "top_logprobs": 99}, "top_logprobs")],
)
def test_ollama_bad_logprobs_are_400_naming_the_field(
    server: str, patch: dict[str, object], param: str
) -> None:
    body = {"model": "fake", "messages": ASK, "stream": False} | patch
    reply = httpx.post(f"{server}/api/chat", json=body, timeout=30)
    assert reply.status_code == 400 and param in reply.text, reply.text
