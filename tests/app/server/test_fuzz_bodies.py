"""Fuzz: any request body gets a 200 or a 4xx naming the field, never a 5xx, and the engine
behind the real app stays healthy and still answers afterwards (a real EngineThread over the
fake runner, the real ASGI app under uvicorn)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ember.app.server.pool import ModelPool
from ember.app.server.security import Guard
from ember.engine.engine_thread import EngineThread
from ember.models.errors import RegistryError
from ember.models.registry.registry import _unknown_message
from tests.app.server.server_harness import running_server
from tests.engine.helpers import make_engine
from tests.fuzz import FUZZ, nasty_text

scalars = st.none() | st.booleans() | st.integers(-(1 << 70), 1 << 70) | st.floats() | nasty_text
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(nasty_text, inner, max_size=3),
    max_leaves=8,
)
valid_message = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system"]), "content": nasty_text}
)
odd_message = st.fixed_dictionaries(
    {},
    optional={
        "role": st.one_of(st.sampled_from(["user", "developer", "tool", "assistant"]), json_values),
        "content": json_values,
        "tool_calls": json_values,
    },
)


# Schemas the compiler cannot end (issue 25: a 500 carrying its state, a RecursionError).
_DEEP: dict[str, Any] = {"type": "integer"}
for _ in range(300):
    _DEEP = {"type": "array", "items": _DEEP}
SCHEMAS = [
    {"$ref": "#"},
    {"type": "object", "properties": {"a": {"$ref": "#"}}, "required": ["a"]},
    _DEEP,
    {"type": "string", "pattern": "a{1000000}"},
    {"type": "object", "properties": {"n": {"type": "integer"}}},
]
# Go durations and near misses (keep_alive): signs, units, fractions, non-ASCII digits.
durations = st.from_regex(
    r"\A[-+]{0,2}[0-9\u00b2\u0665]{0,3}\.{0,2}[0-9]{0,2}(ns|us|ms|s|m|h|d|)\Z"
)


# Plausible values (the edges of each range) half the time, anything JSON the other half.
def _edges(*values: Any) -> st.SearchStrategy[Any]:
    return st.sampled_from(values)


PLAUSIBLE = {
    "model": _edges("fake", "nope", "", "x" * 600, "caf\udce9", "\x1b[2J"),
    "temperature": _edges(-0.1, 0.0, 2.0, 2.1, float("nan"), float("inf")) | st.floats(0, 2),
    "top_p": _edges(0.0, 1e-9, 1.0, 1.1, float("nan")),
    "top_k": _edges(-1, 0, 1, 1 << 20, (1 << 20) + 1),
    "seed": _edges(-1, 0, (1 << 63) - 1, (1 << 64) - 1, 1 << 64) | st.integers(0, 1 << 64),
    "max_tokens": _edges(-1, 0, 1, 16, 17, 10**12),
    "stop": st.lists(nasty_text, max_size=18),
    "stream": st.booleans(),
    "stream_options": st.fixed_dictionaries({"include_usage": st.booleans()}),
    "n": _edges(0, 1, 2, 16, 17),
    "min_p": _edges(-0.1, 0.0, 1.0, 1.1),
    "presence_penalty": _edges(-2.1, -2.0, 2.0, 2.1),
    "frequency_penalty": _edges(-2.1, -2.0, 2.0, 2.1),
    "chat_template_kwargs": st.dictionaries(nasty_text, json_values, max_size=3),
    "response_format": st.builds(
        lambda schema: {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}},
        st.sampled_from(SCHEMAS) | st.dictionaries(nasty_text, json_values, max_size=3),
    ),
}
# A body is mostly valid with a few fields at an edge (where bugs live), or anything at all.
perturbations = st.lists(
    st.sampled_from(sorted(PLAUSIBLE)).flatmap(
        lambda name: st.tuples(st.just(name), st.one_of(PLAUSIBLE[name], PLAUSIBLE[name], json_values))
    ),
    max_size=3,
)  # fmt: skip
bodies = st.builds(
    lambda messages, fields: {"messages": messages, **dict(fields)},
    st.one_of(
        st.lists(valid_message, min_size=1, max_size=3),
        st.lists(valid_message, min_size=1, max_size=3),
        st.lists(valid_message, min_size=1, max_size=3),
        st.lists(odd_message, max_size=3),
        json_values,
    ),
    perturbations,
)


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=60) as client:  # one client: a new one per call costs ~0.4 s
        yield client


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    def load(name: str) -> EngineThread:
        if name != "fake":  # what the registry says about a name it does not know
            raise RegistryError(_unknown_message(name))
        return EngineThread(make_engine(window=0))

    pool = ModelPool(
        load,
        lambda: ["fake"],
        default_model="fake",
        max_tokens_cap=16,
    )
    pool.preload("fake")
    with running_server(pool, Guard(bind_host="127.0.0.1")) as url:
        yield url


def _post(
    http: httpx.Client, url: str, body: Any, path: str = "/v1/chat/completions"
) -> httpx.Response:
    data = json.dumps(body, allow_nan=True).encode()
    return http.post(url + path, content=data, headers={"content-type": "application/json"})


def _check(reply: httpx.Response) -> None:
    assert reply.status_code < 500, reply.text
    if reply.status_code >= 400:
        error = reply.json()["error"]
        assert error["message"] and "\n" not in error["message"]
    elif "text/event-stream" not in reply.headers.get("content-type", ""):
        assert reply.json()["choices"][0]["finish_reason"] in ("stop", "length")


def _healthy(http: httpx.Client, url: str) -> None:
    assert http.get(url + "/health").json()["status"] == "ok"


@settings(FUZZ, max_examples=80)  # every example is an HTTP round trip or two
@given(body=bodies)
def test_chat_bodies(http: httpx.Client, server: str, body: dict[str, Any]) -> None:
    _check(_post(http, server, body))
    _healthy(http, server)


@settings(FUZZ, max_examples=40)
@given(body=st.one_of(json_values, st.fixed_dictionaries({"prompt": json_values})))
def test_completion_bodies(http: httpx.Client, server: str, body: Any) -> None:
    _check(_post(http, server, body, "/v1/completions"))
    _healthy(http, server)


def test_the_engine_still_answers_after_the_fuzz(http: httpx.Client, server: str) -> None:
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    ok = _post(http, server, body)
    assert ok.status_code == 200 and ok.json()["usage"]["completion_tokens"] == 2
    _healthy(http, server)


# The Ollama API on the same server: the same promise (a reply or a 4xx with one line).
OLLAMA_PLAUSIBLE = {
    "model": _edges("fake", "nope", "", "caf\udce9", "\x1b[2J", None),
    "stream": _edges(False, False, True, "no", None),
    "keep_alive": _edges(-1, 0, "5m", "1h", "nope", 1e300, float("nan"), float("inf")) | durations,
    "format": _edges("json", "", {"type": "object"}, {"type": 3}, [], *SCHEMAS),
    "options": st.fixed_dictionaries(
        {},
        optional={
            "num_predict": _edges(-1, 0, 1, 16, 10**12),
            "temperature": _edges(-1.0, 0.0, 2.0, float("nan")),
            "seed": _edges(-1, 0, (1 << 64) - 1, 1 << 64),
            "top_k": _edges(-1, 0, 40),
            "stop": st.lists(nasty_text, max_size=3),
        },
    )
    | st.dictionaries(nasty_text, scalars, min_size=1, max_size=2),  # unknown options, odd names
    "think": _edges(True, False, "x"),
    "raw": _edges(True, False),
    "system": nasty_text,
    # /api/generate's token ids (ollama_context.py): in and out of the vocabulary, wrong types
    "context": _edges([1, 2, 3], [], [-1], [True], [1, 10**9], [1.5], "1,2", [1] * 600)
    | st.lists(st.integers(-5, 300), max_size=20),
}
ollama_fields = st.lists(
    st.sampled_from(sorted(OLLAMA_PLAUSIBLE)).flatmap(
        lambda name: st.tuples(st.just(name), st.one_of(OLLAMA_PLAUSIBLE[name], json_values))
    ),
    max_size=3,
)  # fmt: skip
ollama_bodies = st.one_of(
    st.builds(
        lambda messages, fields: {"model": "fake", "stream": False, "messages": messages, **dict(fields)},
        st.one_of(st.lists(valid_message, min_size=1, max_size=2), st.lists(odd_message, max_size=2)),
        ollama_fields,
    ),
    st.builds(
        lambda prompt, fields: {"model": "fake", "stream": False, "prompt": prompt, **dict(fields)},
        st.one_of(nasty_text, json_values),
        ollama_fields,
    ),
    json_values,
)  # fmt: skip


def _check_ollama(reply: httpx.Response) -> None:
    assert reply.status_code < 500, reply.text
    if reply.status_code >= 400:
        error = reply.json()["error"]
        assert isinstance(error, str) and error and "\n" not in error
    elif "ndjson" in reply.headers.get("content-type", ""):
        lines = [json.loads(line) for line in reply.text.splitlines()]
        assert lines and (lines[-1].get("done") or "error" in lines[-1])
    else:
        assert reply.json()["done"] is True


@settings(FUZZ, max_examples=40)
@given(body=ollama_bodies)
@example(body={"model": "fake", "stream": False, "prompt": "x", "options": {"\x1b[2J\n": 1}})
@example(body={"model": "fake", "stream": False, "prompt": "x", "keep_alive": "--5m"})
@example(body={"model": "fake", "stream": False, "prompt": "x", "keep_alive": 1e300})
@example(body={"model": "fake", "stream": False, "prompt": "x", "format": {"$ref": "#"}})
@example(body={"model": "fake", "stream": False, "prompt": "x", "context": [1, 1 << 40]})
@example(body={"model": "fake", "stream": True, "prompt": "x", "context": [1] * 5000})
@example(
    body={"model": "fake", "stream": False, "messages": [{"role": "assistant", "tool_calls": 5}]}
)
def test_ollama_bodies(http: httpx.Client, server: str, body: Any) -> None:
    path = "/api/chat" if isinstance(body, dict) and "messages" in body else "/api/generate"
    _check_ollama(_post(http, server, body, path))
    _healthy(http, server)
    assert http.get(server + "/api/ps").status_code == 200  # a keep_alive never breaks it
