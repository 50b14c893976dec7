"""/v1/responses through the official openai client and raw HTTP, on a scripted backend: the
translation onto the engine request, output items, stream events, storage and bad input."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from ember.app.server.pool import ModelPool
from ember.app.server.security import Guard
from tests.app.scripted_backend import ScriptedBackend
from tests.app.server.server_harness import running_server

CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}


class Script:
    """The words the next backend replays; the backends it loaded."""

    def __init__(self) -> None:
        self.words = ["Hello", ",", " world", "!"]
        self.backends: list[ScriptedBackend] = []

    def __call__(self, name: str) -> ScriptedBackend:
        backend = ScriptedBackend(name, self.words)
        self.backends.append(backend)
        return backend

    @property
    def last(self):  # the last request the backend got
        return self.backends[-1].requests[-1]


@pytest.fixture
def script() -> Script:
    return Script()


@pytest.fixture
def url(script: Script) -> Iterator[str]:
    pool = ModelPool(script, lambda: ["tiny"], default_model="tiny", max_tokens_cap=512)
    with running_server(pool, Guard(bind_host="127.0.0.1")) as base:
        yield base


def _client(url: str) -> Any:  # the SDK's literal types refuse plain dicts; the server checks
    import openai

    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=30)


def test_create_with_instructions_and_sampling(url: str, script: Script) -> None:
    reply = _client(url).responses.create(
        model="tiny", input="hi", instructions="Be brief.", max_output_tokens=50,
        temperature=0.2, top_p=0.9,
    )  # fmt: skip
    assert reply.output_text == "Hello, world!" and reply.status == "completed"
    assert reply.id.startswith("resp_") and reply.output[0].type == "message"
    assert reply.usage is not None and reply.usage.output_tokens == 4
    assert reply.usage.total_tokens == reply.usage.input_tokens + 4
    sent = script.last
    assert [(m.role, m.content) for m in sent.messages] == [("system", "Be brief."), ("user", "hi")]
    assert (sent.sampling.max_tokens, sent.sampling.temperature, sent.sampling.top_p) == (
        50,
        0.2,
        0.9,
    )
    assert reply.instructions == "Be brief." and reply.temperature == 0.2


def test_stream_events_in_order(url: str) -> None:
    events = list(_client(url).responses.create(model="tiny", input="hi", stream=True))
    kinds = [e.type for e in events]
    assert kinds[:4] == [
        "response.created", "response.in_progress", "response.output_item.added",
        "response.content_part.added",
    ]  # fmt: skip
    assert kinds[-4:] == [
        "response.output_text.done", "response.content_part.done", "response.output_item.done",
        "response.completed",
    ]  # fmt: skip
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == "Hello, world!" and events[-1].response.output_text == deltas
    with _client(url).responses.stream(model="tiny", input="hi") as stream:
        final = stream.get_final_response()
    assert final.output_text == "Hello, world!"


def test_reasoning_and_function_call_items(url: str, script: Script) -> None:
    script.words = ["<think>", "Need", " weather", "</think>", "\n", CALL]
    client = _client(url)
    reply = client.responses.create(
        model="tiny", input="Weather in Paris?", tools=[TOOL], reasoning={"effort": "high"}
    )
    assert [item.type for item in reply.output] == ["reasoning", "function_call"]
    thought, call = reply.output
    assert thought.content and thought.content[0].text == "Need weather"
    assert call.name == "get_weather" and json.loads(call.arguments) == {"city": "Paris"}
    assert call.call_id and call.id.startswith("fc_") and reply.status == "completed"
    assert script.last.template_kwargs == {"enable_thinking": True, "reasoning_effort": "high"}
    assert reply.usage.output_tokens_details.reasoning_tokens == 4  # <think>, 2 words, </think>
    events = list(
        client.responses.create(model="tiny", input="Weather?", tools=[TOOL], stream=True)
    )
    kinds = [e.type for e in events]
    assert "response.reasoning_text.delta" in kinds
    args = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    done = [e for e in events if e.type == "response.function_call_arguments.done"]
    assert len(done) == 1 and json.loads(args) == json.loads(done[0].arguments) == {"city": "Paris"}
    assert events[-1].response.usage.output_tokens_details.reasoning_tokens == 4


def test_function_call_round_trip_items(url: str, script: Script) -> None:
    history = [
        {"role": "user", "content": [{"type": "input_text", "text": "Weather in Paris?"}]},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": '{"city": "Paris"}'},
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
    ]  # fmt: skip
    reply = _client(url).responses.create(model="tiny", input=history, tools=[TOOL])
    assert reply.output_text == "Hello, world!"
    roles = [(m.role, m.content, m.name) for m in script.last.messages]
    assert roles == [
        ("user", "Weather in Paris?", ""),
        ("assistant", "", ""),
        ("tool", "sunny", "get_weather"),
    ]
    assert script.last.messages[1].tool_calls[0].id == "c1"


def test_store_previous_response_get_delete(url: str, script: Script) -> None:
    client = _client(url)
    first = client.responses.create(model="tiny", input="My name is Ada.")
    second = client.responses.create(model="tiny", input="And?", previous_response_id=first.id)
    contents = [m.content for m in script.last.messages]
    assert contents == ["My name is Ada.", "Hello, world!", "And?"]
    assert second.previous_response_id == first.id
    assert client.responses.retrieve(first.id).output_text == "Hello, world!"
    client.responses.delete(first.id)
    import openai

    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(first.id)
    with pytest.raises(openai.NotFoundError) as caught:
        client.responses.create(model="tiny", input="x", previous_response_id=first.id)
    assert "previous_response_id" in str(caught.value)
    unstored = client.responses.create(model="tiny", input="x", store=False)
    assert httpx.get(f"{url}/v1/responses/{unstored.id}").status_code == 404
    assert httpx.delete(f"{url}/v1/responses/nope").status_code == 404


def test_incomplete_json_schema_and_single_call(url: str, script: Script) -> None:
    client = _client(url)
    cut = client.responses.create(model="tiny", input="hi", max_output_tokens=2)
    assert cut.status == "incomplete" and cut.incomplete_details.reason == "max_output_tokens"
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    fmt = {"format": {"type": "json_schema", "name": "x", "schema": schema, "strict": True}}
    client.responses.create(model="tiny", input="hi", text=fmt)
    assert script.last.constraint.kind == "json_schema"
    assert json.loads(script.last.constraint.text) == schema
    script.backends[-1].words = [CALL, CALL]  # the loaded backend replays these now
    two = client.responses.create(model="tiny", input="hi", tools=[TOOL])
    one = client.responses.create(model="tiny", input="hi", tools=[TOOL], parallel_tool_calls=False)
    assert [i.type for i in two.output] == ["function_call"] * 2
    assert [i.type for i in one.output] == ["function_call"]


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"input": "hi", "frobnicate": 1}, "frobnicate"),
        ({}, "input"),
        ({"input": []}, "input"),
        ({"input": [{"type": "bogus"}]}, "input[0].type"),
        ({"input": [{"role": "robot", "content": "x"}]}, "input[0].role"),
        ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}, "input[0].content[0]"),
        ({"input": [{"type": "function_call_output", "call_id": "zz", "output": "x"}]}, "input[0].call_id"),
        ({"input": [{"type": "function_call", "call_id": "a", "name": "f", "arguments": "{oops"}]}, "input[0].arguments"),
        ({"input": "hi", "max_output_tokens": 10**6}, "max_output_tokens"),
        ({"input": "hi", "temperature": "hot"}, "temperature"),
        ({"input": "hi", "text": {"format": {"type": "json_schema", "schema": 3}}}, "text.format.schema"),
        ({"input": "hi", "text": {"format": {"type": "yaml"}}}, "text.format"),
        ({"input": "hi", "tools": [{"type": "web_search"}]}, "tools[0].type"),
        ({"input": "hi", "tools": [TOOL | {"name": "bad name!"}]}, "tools[0].name"),
        ({"input": "hi", "tool_choice": {"type": "function", "name": "nope"}, "tools": [TOOL]}, "tool_choice.name"),
        ({"input": "hi", "reasoning": {"effort": "extreme"}}, "reasoning.effort"),
        ({"input": "hi", "include": ["file_search_call.results"]}, "include"),
        ({"input": "hi", "previous_response_id": "resp_missing"}, "previous_response_id"),
        ({"input": [{"role": "user", "content": [[[[[[]]]]]]}]}, "input[0].content[0].type"),
    ],
)  # fmt: skip
def test_bad_input_names_the_field(url: str, body: dict, param: str) -> None:
    response = httpx.post(f"{url}/v1/responses", json={"model": "tiny", **body}, timeout=30)
    assert response.status_code in (400, 404), response.text
    error = response.json()["error"]
    assert error["param"] == param, error
    assert error["type"] == "invalid_request_error"


def test_deeply_nested_body_is_400(url: str) -> None:
    body = '{"model": "tiny", "input": ' + "[" * 100_000 + "]" * 100_000 + "}"
    response = httpx.post(f"{url}/v1/responses", content=body, timeout=30)
    assert response.status_code in (400, 413)
