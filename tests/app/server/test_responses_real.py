"""The openai SDK's Responses API against a real `ember serve` process on the starter model:
create, stream, structured output and a function-call round trip (previous_response_id and
items sent back by hand)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.app.server.server_harness import SAME_LOGITS_RUNNER, WEATHER_FUNCTION, serve_models

pytestmark = pytest.mark.model
pytest.importorskip("llguidance", reason="tool_choice required needs llguidance")

MODEL = "gemma3"
WEATHER = {"type": "function", **WEATHER_FUNCTION}


@pytest.fixture(scope="module")
def client(starter_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    import openai

    home = tmp_path_factory.mktemp("serve_home")
    serve = ("--model", MODEL, *SAME_LOGITS_RUNNER, "--threads", "2", "--ctx", "1024")
    with serve_models(home, {MODEL: starter_gguf}, *serve) as url:
        yield openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=300)
    assert (home / "data" / "responses.sqlite3").is_file()  # stored in Ember's home


def test_create_and_retrieve(client) -> None:
    reply = client.responses.create(
        model=MODEL, input="Say hello.", max_output_tokens=8, temperature=0
    )
    assert reply.output_text and reply.status in ("completed", "incomplete")
    assert reply.usage.input_tokens > 0 and 0 < reply.usage.output_tokens <= 8
    assert client.responses.retrieve(reply.id).output_text == reply.output_text


def test_stream_matches_whole(client) -> None:
    ask = dict(model=MODEL, input="Once upon a time", max_output_tokens=8, temperature=0)
    # first the prompt into the prefix cache, so both compared replies reuse the same cached
    # blocks: a cold prefill and a cached prefix + suffix may break a near tie apart (the server
    # runs SAME_LOGITS_RUNNER, whose warm replies agree; see server_harness)
    client.responses.create(**ask)
    whole = client.responses.create(**ask)
    events = list(client.responses.create(**ask, stream=True))
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[0].type == "response.created" and events[-1].type in (
        "response.completed", "response.incomplete",
    )  # fmt: skip
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == whole.output_text == events[-1].response.output_text


def test_json_schema_format(client) -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 20}},
        "required": ["name"],
        "additionalProperties": False,
    }
    reply = client.responses.create(
        model=MODEL, input="A person as JSON.", max_output_tokens=40, temperature=0,
        text={"format": {"type": "json_schema", "name": "person", "schema": schema, "strict": True}},
    )  # fmt: skip
    assert set(json.loads(reply.output_text)) == {"name"}


def test_function_call_round_trip(client) -> None:
    ask = "What is the weather in Paris?"
    first = client.responses.create(
        model=MODEL, input=ask, tools=[WEATHER], tool_choice="required",
        max_output_tokens=60, temperature=0,
    )  # fmt: skip
    calls = [item for item in first.output if item.type == "function_call"]
    assert len(calls) == 1 and calls[0].name == "get_weather" and calls[0].call_id
    assert isinstance(json.loads(calls[0].arguments)["city"], str)
    result = {"type": "function_call_output", "call_id": calls[0].call_id, "output": "Sunny, 21 C"}
    chained = client.responses.create(
        model=MODEL, previous_response_id=first.id, input=[result], tools=[WEATHER],
        max_output_tokens=16, temperature=0,
    )  # fmt: skip
    by_hand = client.responses.create(
        model=MODEL, input=[{"role": "user", "content": ask}, *first.output, result],
        tools=[WEATHER], max_output_tokens=16, temperature=0,
    )  # fmt: skip
    assert chained.status in ("completed", "incomplete") and chained.output
    assert chained.output_text == by_hand.output_text  # the same conversation, the same reply
