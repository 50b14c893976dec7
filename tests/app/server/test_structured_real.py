"""Structured output that ends (issue 23 part 7), through a real `ember serve` on the starter
model: asked for {"city": string, "population": integer} with a strict schema, the starter used
to write 1000000000... until max_tokens. Numbers now get at most 16 integral digits (as
llama.cpp's converter), so the reply closes and parses, on the OpenAI and the Ollama field.
Schemas the compiler cannot end (endless $ref recursion, thousands deep) are a 4xx in one line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.app.server.server_harness import serve_models

pytestmark = pytest.mark.model
pytest.importorskip("llguidance", reason="structured output needs llguidance")

MODEL = "gemma3"
CITY = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
    "required": ["city", "population"],
    "additionalProperties": False,
}
ASK = [{"role": "user", "content": "What is the biggest city of France, and its population?"}]


@pytest.fixture(scope="module")
def server(starter_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    home = tmp_path_factory.mktemp("serve_home")
    serve = ("--model", MODEL, "--runner", "llama.cpp", "--threads", "2", "--ctx", "1024")
    with serve_models(home, {MODEL: starter_gguf}, *serve, "--no-prefix-cache") as url:
        yield url


def _check_city(text: str) -> None:
    reply = json.loads(text)
    assert set(reply) == {"city", "population"} and isinstance(reply["city"], str)
    assert isinstance(reply["population"], int) and len(str(abs(reply["population"]))) <= 16


def test_a_strict_schema_reply_closes_on_the_openai_route(server: str) -> None:
    import openai

    client = openai.OpenAI(base_url=f"{server}/v1", api_key="unused", max_retries=0, timeout=300)
    schema = {"name": "city", "strict": True, "schema": CITY}
    ask: dict[str, Any] = {"model": MODEL, "messages": ASK, "max_tokens": 400, "temperature": 0}
    ask["response_format"] = {"type": "json_schema", "json_schema": schema}
    reply = client.chat.completions.create(**ask)
    choice = reply.choices[0]
    assert choice.finish_reason == "stop", choice.message.content
    _check_city(choice.message.content or "")


def test_a_schema_format_reply_closes_on_the_ollama_route(server: str) -> None:
    body = {"model": MODEL, "messages": ASK, "stream": False, "format": CITY,
            "options": {"num_predict": 400, "temperature": 0}}  # fmt: skip
    reply = httpx.post(f"{server}/api/chat", json=body, timeout=300).json()
    assert reply["done_reason"] == "stop", reply
    _check_city(reply["message"]["content"])


def _deep(levels: int) -> dict[str, object]:
    schema: dict[str, object] = {"type": "object", "properties": {}}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}, "required": ["a"]}
    return schema


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "#"},
        {"type": "object", "properties": {"a": {"$ref": "#"}}, "required": ["a"]},
        _deep(300),
        {"type": "string", "pattern": "a{1000000}"},
    ],
)
def test_schemas_the_compiler_cannot_end_are_a_4xx_in_one_line(
    server: str, schema: dict[str, object]
) -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}
    openai_body = {"messages": ASK, "max_tokens": 4, "response_format": fmt}
    reply = httpx.post(f"{server}/v1/chat/completions", json=openai_body, timeout=120)
    assert reply.status_code == 422, reply.text
    error = reply.json()["error"]
    assert error["param"] == "response_format.json_schema.schema"
    assert "<state>" not in error["message"] and len(error["message"]) < 300
    ollama_body = {"model": MODEL, "messages": ASK, "stream": False, "format": schema}
    reply = httpx.post(f"{server}/api/chat", json=ollama_body, timeout=120)
    assert reply.status_code == 400 and reply.json()["error"].startswith("format")
    assert "<state>" not in reply.json()["error"]
    ok = httpx.post(f"{server}/api/chat", json={"model": MODEL, "messages": ASK, "stream": False,
                                                "options": {"num_predict": 2}}, timeout=120)  # fmt: skip
    assert ok.status_code == 200
