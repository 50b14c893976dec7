"""The official clients against a real `ember serve` process on the starter model.

One server for the whole module (a subprocess with its own EMBER_HOME, the starter model
registered there as `gemma3`), nothing injected: the openai client, the ollama client and
simonw's `llm` CLI (configured through extra-openai-models.yaml in a temporary LLM_USER_PATH).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.app.server.server_harness import SAME_LOGITS_RUNNER, WEATHER_FUNCTION, serve_models

pytestmark = pytest.mark.model
pytest.importorskip("llguidance", reason="structured output needs llguidance")

MODEL = "gemma3"
PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 30},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}
WEATHER = {"type": "function", "function": WEATHER_FUNCTION}


@pytest.fixture(scope="module")
def server(starter_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    serve = ("--model", MODEL, *SAME_LOGITS_RUNNER, "--threads", "2", "--ctx", "1024")
    home = tmp_path_factory.mktemp("serve_home")
    with serve_models(home, {MODEL: starter_gguf}, *serve, drop_env=("OPENAI_API_KEY",)) as url:
        yield url


def _openai(url: str):
    import openai

    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=300)


def test_openai_json_schema_reply(server: str) -> None:
    import jsonschema

    reply = _openai(server).chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Describe a person as JSON."}],
        temperature=0,
        max_tokens=60,
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "person", "schema": PERSON},
        },
    )
    jsonschema.validate(json.loads(reply.choices[0].message.content or ""), PERSON)


def test_openai_required_tool_call_and_streaming(server: str) -> None:
    client = _openai(server)
    ask = [{"role": "user", "content": "What is the weather in Paris?"}]
    reply = client.chat.completions.create(
        model=MODEL,
        messages=ask,
        temperature=0,
        max_tokens=60,
        tools=[WEATHER],
        tool_choice="required",
    )
    calls = reply.choices[0].message.tool_calls
    assert reply.choices[0].finish_reason == "tool_calls" and calls and len(calls) == 1
    assert calls[0].function.name == "get_weather"
    assert isinstance(json.loads(calls[0].function.arguments)["city"], str)
    stream = client.chat.completions.create(
        model=MODEL, messages=ask, max_tokens=8, temperature=0, stream=True,
        stream_options={"include_usage": True},
    )  # fmt: skip
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0


def test_openai_streams_tool_call_arguments(server: str) -> None:
    client = _openai(server)
    ask = [{"role": "user", "content": "What is the weather in Oslo?"}]
    request = dict(
        model=MODEL, messages=ask, temperature=0, max_tokens=60, tools=[WEATHER],
        tool_choice="required",
    )  # fmt: skip
    whole = client.chat.completions.create(**request).choices[0].message.tool_calls
    assert whole and len(whole) == 1
    chunks = list(client.chat.completions.create(**request, stream=True))
    deltas = [tc for c in chunks if c.choices for tc in (c.choices[0].delta.tool_calls or [])]
    first, rest = deltas[0], deltas[1:]
    assert (first.index, first.type, first.function.name) == (0, "function", "get_weather")
    assert first.id and first.function.arguments == ""
    assert len(rest) > 1 and all(d.index == 0 and d.function.name is None for d in rest)
    arguments = "".join(d.function.arguments or "" for d in rest)
    assert json.loads(arguments) == json.loads(whole[0].function.arguments)
    assert arguments == whole[0].function.arguments
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "tool_calls"


def test_model_lists(server: str) -> None:
    import ollama

    assert MODEL in {m.id for m in _openai(server).models.list()}
    assert MODEL in [m.model for m in ollama.Client(host=server).list().models]


def test_ollama_client(server: str) -> None:
    import ollama

    client = ollama.Client(host=server, timeout=300)
    assert MODEL in [m.model for m in client.ps().models]
    shown = client.show(MODEL)
    assert shown.details is not None and shown.details.family
    chat = client.chat(
        model=MODEL,
        messages=[{"role": "user", "content": "Hi"}],
        options={"num_predict": 6, "temperature": 0},
    )
    assert chat.message.content and chat.done_reason in ("stop", "length")
    parts = list(
        client.generate(
            model=MODEL,
            prompt="Once upon a time",
            stream=True,
            options={"num_predict": 6, "temperature": 0},
        )
    )
    assert "".join(p.response or "" for p in parts) and parts[-1].done and parts[-1].eval_count
    formatted = client.chat(
        model=MODEL,
        messages=[{"role": "user", "content": "A person as JSON"}],
        format=PERSON,
        options={"num_predict": 60, "temperature": 0},
    )
    assert set(json.loads(formatted.message.content or "")) == {"name", "age"}


def test_llm_cli(server: str, tmp_path: Path) -> None:
    llm = shutil.which("llm", path=str(Path(sys.executable).parent))
    if llm is None:
        pytest.fail("the llm CLI is missing: pip install -e '.[dev]'")
    (tmp_path / "extra-openai-models.yaml").write_text(
        f"- model_id: ember\n  model_name: {MODEL}\n  api_base: {server}/v1\n"
    )
    env = {**os.environ, "LLM_USER_PATH": str(tmp_path), "OPENAI_API_KEY": "unused"}
    out = subprocess.run(
        [llm, "-m", "ember", "-o", "max_tokens", "8", "-o", "temperature", "0", "Say hi"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip()
