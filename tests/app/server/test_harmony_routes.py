"""A harmony (gpt-oss) reply through every chat API of a real server, with the official
clients: the analysis channel is reasoning (OpenAI's reasoning_content, Anthropic's thinking
block, a Responses reasoning item, Ollama's thinking), the final channel the content, a
commentary call a tool call; past reasoning sent back reaches the engine request.

The backend replays a harmony reply cut mid-tag (tests/app/scripted_backend.py) under the
tool format a gpt-oss template gets ("harmony"); the model itself is tested in
tests/engine/test_harmony_engine.py.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import pytest

from ember.app.server.pool import ModelPool
from ember.app.server.security import Guard
from ember.models.errors import RegistryError
from tests.app.scripted_backend import ScriptedBackend
from tests.app.server.server_harness import WEATHER_FUNCTION, running_server

ANSWER = [
    "<|chan", "nel|>analysis<|mess", "age|>Rain is ", "likely.<|e", "nd|><|start|>assistant",
    "<|channel|>final<|message|>", "It rains", ".",
]  # fmt: skip
CALL = [
    "<|channel|>analysis<|message|>Ask the tool.<|end|><|start|>assistant<|channel|>commentary",
    " to=functions.get_weather <|cons", 'train|>json<|message|>{"city":', ' "Paris"}',
]  # fmt: skip
ASK: list[Any] = [{"role": "user", "content": "Weather in Paris?"}]


def _load(name: str) -> ScriptedBackend:
    if name not in ("answers", "calls"):
        raise RegistryError(f"model {name!r} not found")
    backend = ScriptedBackend(name, ANSWER if name == "answers" else CALL)
    backend._info = dataclasses.replace(backend.info, tool_format="harmony")  # gpt-oss's
    return backend


@pytest.fixture(scope="module")
def pool() -> ModelPool:
    return ModelPool(_load, lambda: ["answers", "calls"], default_model="answers", max_loaded=2)


@pytest.fixture(scope="module")
def url(pool: ModelPool) -> Iterator[str]:
    with running_server(pool, Guard(bind_host="127.0.0.1")) as base:
        yield base


def _sent(pool: ModelPool, name: str) -> Any:  # the last engine request the backend got
    backend: Any = pool.get(name)
    pool.release(name)
    return backend.requests[-1]


def test_openai_chat(url: str, pool: ModelPool) -> None:
    import openai

    client: Any = openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0)
    message = client.chat.completions.create(model="answers", messages=ASK).choices[0].message
    assert (message.content, message.reasoning_content) == ("It rains.", "Rain is likely.")
    deltas = [
        c.choices[0].delta
        for c in client.chat.completions.create(model="answers", messages=ASK, stream=True)
        if c.choices
    ]
    assert "".join(d.content or "" for d in deltas) == "It rains."
    assert "".join(getattr(d, "reasoning_content", None) or "" for d in deltas) == "Rain is likely."
    tools = [{"type": "function", "function": WEATHER_FUNCTION}]
    reply = client.chat.completions.create(model="calls", messages=ASK, tools=tools)
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls" and not choice.message.content
    call = choice.message.tool_calls[0].function
    assert (call.name, json.loads(call.arguments)) == ("get_weather", {"city": "Paris"})
    history: list[Any] = [
        *ASK,
        {"role": "assistant", "content": None, "reasoning_content": "Ask the tool.",
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "rain"},
    ]  # fmt: skip
    client.chat.completions.create(model="answers", messages=history, tools=tools)
    assert _sent(pool, "answers").messages[1].reasoning == "Ask the tool."
    with pytest.raises(openai.BadRequestError, match=r"messages\[1\].reasoning_content"):
        client.chat.completions.create(
            model="answers",
            messages=[*ASK, {"role": "assistant", "content": "x", "reasoning_content": 5}],
        )


def test_anthropic_messages(url: str, pool: ModelPool) -> None:
    import anthropic

    client: Any = anthropic.Anthropic(base_url=url, api_key="x", max_retries=0)
    reply = client.messages.create(model="answers", max_tokens=64, messages=ASK)
    assert [
        (b.type, getattr(b, "thinking", None) or getattr(b, "text", None)) for b in reply.content
    ] == [
        ("thinking", "Rain is likely."),
        ("text", "It rains."),
    ]
    tools = [{"name": "get_weather", "input_schema": WEATHER_FUNCTION["parameters"]}]
    called = client.messages.create(model="calls", max_tokens=64, messages=ASK, tools=tools)
    use = [b for b in called.content if b.type == "tool_use"]
    assert called.stop_reason == "tool_use" and [(u.name, u.input) for u in use] == [
        ("get_weather", {"city": "Paris"})
    ]
    thinking = next(b for b in called.content if b.type == "thinking").model_dump()
    history: list[Any] = [
        *ASK,
        {"role": "assistant", "content": [thinking,  # sent back as it came, signature and all
                                          {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"city": "Paris"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "rain"}]},
    ]  # fmt: skip
    client.messages.create(model="answers", max_tokens=64, messages=history, tools=tools)
    assert _sent(pool, "answers").messages[1].reasoning == "Ask the tool."


def test_responses(url: str, pool: ModelPool) -> None:
    import openai

    client: Any = openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0)
    reply = client.responses.create(model="answers", input="Weather in Paris?")
    assert [item.type for item in reply.output] == ["reasoning", "message"]
    assert reply.output[0].content[0].text == "Rain is likely."
    assert reply.output_text == "It rains."
    tool = {"type": "function", **WEATHER_FUNCTION}
    called = client.responses.create(model="calls", input="Weather in Paris?", tools=[tool])
    assert [item.type for item in called.output] == ["reasoning", "function_call"]
    assert json.loads(called.output[1].arguments) == {"city": "Paris"}
    # the output items sent back as input: the reasoning goes with the call's assistant turn
    history: list[Any] = [
        {"role": "user", "content": "Weather in Paris?"},
        *[item.model_dump(exclude_none=True) for item in called.output],
        {"type": "function_call_output", "call_id": called.output[1].call_id, "output": "rain"},
    ]
    client.responses.create(model="answers", input=history, tools=[tool])
    sent = _sent(pool, "answers").messages
    assert [(m.role, m.reasoning) for m in sent] == [
        ("user", ""),
        ("assistant", "Ask the tool."),
        ("tool", ""),
    ]
    summary = {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Short."}]}
    client.responses.create(model="answers", input=[history[0], summary, *history[2:]])
    assert _sent(pool, "answers").messages[1].reasoning == "Short."
    with pytest.raises(openai.BadRequestError, match=r"input\[1\]\.content\[0\]"):
        client.responses.create(
            model="answers", input=[history[0], {"type": "reasoning", "content": [{"x": 1}]}]
        )


def test_ollama_chat(url: str, pool: ModelPool) -> None:
    import ollama

    client: Any = ollama.Client(host=url)
    message = client.chat(model="answers", messages=ASK).message
    assert (message.thinking, message.content) == ("Rain is likely.", "It rains.")
    called = client.chat(
        model="calls", messages=ASK, tools=[{"type": "function", "function": WEATHER_FUNCTION}]
    ).message
    assert [(c.function.name, dict(c.function.arguments)) for c in called.tool_calls or []] == [
        ("get_weather", {"city": "Paris"})
    ]
    history: list[Any] = [*ASK, {"role": "assistant", "content": "", "thinking": "Looked.", "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]}]  # fmt: skip
    client.chat(model="answers", messages=history)
    assert _sent(pool, "answers").messages[1].reasoning == "Looked."
