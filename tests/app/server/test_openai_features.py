"""Tools, structured output, reasoning and refusals through the real server and engine.

The engine is the real one (EngineThread, grammar masks, tool-call grammar) over the fake runner,
whose logits are noise: every well-formed reply here is the constraint's doing.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Iterator

import httpx
import pytest

from ember.app.commands.serve import served_check
from ember.app.server.pool import ModelPool
from ember.app.server.security import Guard
from ember.engine.api import EngineOptions
from ember.engine.engine import Engine
from ember.engine.engine_thread import EngineThread
from ember.engine.load import load_engine
from ember.engine.runners.fake import FakeRunner
from ember.models.errors import RegistryError, TemplateError
from tests.app.scripted_backend import ScriptedBackend
from tests.app.server.server_harness import running_server

pytest.importorskip("llguidance", reason="structured output needs llguidance")

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"enum": ["Paris", "Rome"]},
                "days": {"type": "integer", "minimum": 1, "maximum": 7},
            },
            "required": ["city", "days"],
        },
    },
}
CLOCK = {
    "type": "function",
    "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}},
}
PERSON = {
    "type": "object",
    "properties": {
        "name": {"enum": ["Ada", "Alan"]},
        "age": {"type": "integer", "minimum": 0, "maximum": 99},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


class RefusingChat:
    tool_format = "generic"

    def __call__(self, messages, tools=(), template_kwargs=None):
        raise TemplateError("chat template (test) refused: Conversation roles must alternate")


def _load(name: str):
    if name == "fake":
        return load_engine(EngineOptions(model="fake", runner="fake", prefix_disk_bytes=0))
    if name == "strict":
        options = EngineOptions(model="strict", prefix_disk_bytes=0)
        return EngineThread(Engine(FakeRunner(), options, chat=RefusingChat()))
    if name == "thinker":
        return ScriptedBackend(
            name, ["<thi", "nk>\nhmm, ", "rain?", "</think>", "\n\nIt ", "rains."]
        )
    raise RegistryError(f"model {name!r} not found")


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    names = ["fake", "strict", "thinker"]
    pool = ModelPool(_load, lambda: names, default_model="fake", max_loaded=3, max_tokens_cap=512)
    with running_server(pool, Guard(bind_host="127.0.0.1")) as url:
        yield url


def _client(url: str):
    import openai

    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=60)


def test_json_schema_reply_parses_and_matches(server: str) -> None:
    import jsonschema

    reply = _client(server).chat.completions.create(
        model="fake",
        messages=[{"role": "user", "content": "A person, please."}],
        seed=2,
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "person", "schema": PERSON, "strict": True},
        },
    )
    jsonschema.validate(json.loads(reply.choices[0].message.content or ""), PERSON)
    assert reply.choices[0].finish_reason == "stop"
    obj = _client(server).chat.completions.create(
        model="fake", messages=ASK, seed=5, max_tokens=300, response_format={"type": "json_object"}
    )
    assert obj.choices[0].finish_reason == "length" or isinstance(
        json.loads(obj.choices[0].message.content or ""), dict
    )


def test_required_tool_choice_returns_a_well_formed_call(server: str) -> None:
    for seed in range(3):
        reply = _client(server).chat.completions.create(
            model="fake", messages=ASK, seed=seed, tools=[WEATHER, CLOCK], tool_choice="required"
        )
        choice = reply.choices[0]
        assert choice.finish_reason == "tool_calls" and choice.message.tool_calls
        call = choice.message.tool_calls[0]
        assert call.id.startswith("call_") and call.type == "function"
        args = json.loads(call.function.arguments)
        if call.function.name == "get_weather":
            assert args["city"] in ("Paris", "Rome") and 1 <= args["days"] <= 7
        else:
            assert call.function.name == "get_time" and args == {}


def test_named_tool_choice_streams_the_call_and_its_arguments(server: str) -> None:
    stream = _client(server).chat.completions.create(
        model="fake",
        messages=ASK,
        seed=1,
        tools=[WEATHER, CLOCK],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    deltas = [tc for c in chunks if c.choices for tc in (c.choices[0].delta.tool_calls or [])]
    first, rest = deltas[0], deltas[1:]  # the call as soon as its name is known, then arguments
    assert (first.index, first.type, first.function.name) == (0, "function", "get_weather")
    assert first.id and first.function.arguments == ""
    assert len(rest) > 1 and all(d.index == 0 and d.id is None for d in rest)
    assert all(d.function.name is None for d in rest)
    arguments = "".join(d.function.arguments or "" for d in rest)
    assert json.loads(arguments)["city"] in ("Paris", "Rome")
    whole = _client(server).chat.completions.create(
        model="fake",
        messages=ASK,
        seed=1,
        tools=[WEATHER, CLOCK],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
    )  # the same seed: the same reply, whole
    calls = whole.choices[0].message.tool_calls
    assert calls and calls[0].function.arguments == arguments
    finishes = [
        c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason
    ]
    assert finishes == ["tool_calls"] and chunks[-1].usage is not None


def test_tool_turns_are_accepted(server: str) -> None:
    messages = [
        *ASK,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {
                        "name": "get_weather",
                        "arguments": '{"city": "Paris", "days": 1}',
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "18 C and sunny"},
    ]
    reply = _client(server).chat.completions.create(
        model="fake", messages=messages, tools=[WEATHER], max_tokens=5
    )
    assert reply.choices[0].message.role == "assistant"


def test_reasoning_content_is_split_off(server: str) -> None:
    reply = _client(server).chat.completions.create(model="thinker", messages=ASK)
    message = reply.choices[0].message
    assert message.content == "It rains." and message.reasoning_content == "hmm, rain?"
    stream = _client(server).chat.completions.create(model="thinker", messages=ASK, stream=True)
    deltas = [c.choices[0].delta for c in stream if c.choices]
    assert "".join(d.content or "" for d in deltas) == "It rains."
    assert "".join(getattr(d, "reasoning_content", None) or "" for d in deltas) == "hmm, rain?"


@pytest.mark.parametrize(
    ("patch", "param"),
    [
        ({"n": 0}, "n"),
        ({"logit_bias": {"1": 500}}, "logit_bias['1']"),
        ({"logit_bias": [[1]]}, "logit_bias[0]"),
        ({"audio": {}}, "audio"),
        ({"response_format": {"type": "xml"}}, "response_format.type"),
        (
            {"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}},
            "response_format.json_schema.schema",
        ),
        ({"tools": [{"type": "retrieval"}]}, "tools[0].type"),
        (
            {"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "nope"}}},
            "tool_choice.function.name",
        ),
        ({"tool_choice": "required"}, "tool_choice"),
        ({"chat_template_kwargs": {"messages": []}}, "chat_template_kwargs"),
        ({"seed": -1}, "seed"),
        ({"ignore_eos": "yes"}, "ignore_eos"),
        ({"stop_token_ids": [-1]}, "stop_token_ids"),
        ({"repeat_penalty": 1.1, "repetition_penalty": 1.2}, "repetition_penalty"),
        (
            {"messages": [{"role": "tool", "content": "x", "tool_call_id": 5}]},
            "messages[0].tool_call_id",
        ),
    ],
)
def test_unserved_fields_are_400_naming_them(
    server: str, patch: dict[str, object], param: str
) -> None:
    body = {"model": "fake", "messages": ASK} | patch
    reply = httpx.post(f"{server}/v1/chat/completions", json=body, timeout=30)
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"]["param"] == param


def test_engine_sampling_extensions_are_served(server: str) -> None:
    """ignore_eos, stop_token_ids and vLLM's repetition_penalty (what engine/remote sends)."""
    body = {"model": "fake", "messages": ASK, "max_tokens": 7, "ignore_eos": True}
    body |= {"stop_token_ids": [], "repetition_penalty": 1.1}
    reply = httpx.post(f"{server}/v1/chat/completions", json=body, timeout=30)
    assert reply.status_code == 200, reply.text
    assert reply.json()["usage"]["completion_tokens"] == 7
    assert reply.json()["choices"][0]["finish_reason"] == "length"


def test_template_refusal_is_400_not_500(server: str) -> None:
    body = {"model": "strict", "messages": [{"role": "assistant", "content": "first"}]}
    reply = httpx.post(f"{server}/v1/chat/completions", json=body, timeout=30)
    assert reply.status_code == 400 and "alternate" in reply.json()["error"]["message"]


def test_deeply_nested_body_is_400(server: str) -> None:
    body = b"[" * 100_000 + b"]" * 100_000
    reply = httpx.post(f"{server}/v1/chat/completions", content=body, timeout=30)
    assert reply.status_code == 400 and "nested" in reply.json()["error"]["message"]


def test_model_cards(server: str) -> None:
    assert httpx.get(f"{server}/v1/models/fake", timeout=30).json()["id"] == "fake"
    missing = httpx.get(f"{server}/v1/models/nope", timeout=30)
    assert missing.status_code == 404 and "not served here" in missing.json()["error"]["message"]


def test_paths_and_urls_are_refused_with_one_message(server: str, tmp_path) -> None:
    (tmp_path / "real.gguf").write_bytes(b"GGUF")
    messages = []
    for model in (
        str(tmp_path / "real.gguf"),
        str(tmp_path / "missing.gguf"),
        "/etc/passwd",
        "http://127.0.0.1:9/v1",
        "nope",
    ):
        body = {"model": model, "messages": ASK}
        reply = httpx.post(f"{server}/v1/chat/completions", json=body, timeout=30)
        assert reply.status_code == 404, reply.text
        # the name as quoted (a long path is cut to its start and end, so compare the rest)
        messages.append(re.sub(r"'[^']*'", "M", reply.json()["error"]["message"], count=1))
    assert len(set(messages)) == 1, messages


def test_served_check_follows_the_operators_opt_ins(tmp_path) -> None:
    allowed = tmp_path / "models"
    allowed.mkdir()
    args = argparse.Namespace(
        model=None, allow_model_path=[str(allowed)], allow_remote=["http://box.lan:8000/v1"]
    )
    is_served = served_check(args)
    assert is_served(str(allowed / "a.gguf")) and not is_served(str(tmp_path / "b.gguf"))
    assert not is_served(str(allowed / ".." / "b.gguf"))
    assert is_served("http://box.lan:8000/v1") and not is_served("http://evil.example/v1")
    assert not is_served("http://box.lan:8000/v1evil")
    closed = served_check(argparse.Namespace(model="x.gguf", allow_model_path=[], allow_remote=[]))
    assert closed("x.gguf") and not closed("/tmp/y.gguf") and not closed("http://a/v1")
