"""The Anthropic Messages API through the real server and the official `anthropic` SDK: shapes,
streaming events, thinking, tools (the real engine and its tool-call grammar over the fake
runner, whose logits are noise: a well-formed call is the grammar's doing), errors, aliases."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from ember.app.server.anthropic.signing import ThinkingSigner
from ember.app.server.model_aliases import ModelAliases
from ember.app.server.pool import ModelPool
from ember.app.server.security import Guard
from ember.engine.api import EngineOptions
from ember.engine.load import load_engine
from ember.models.errors import RegistryError
from tests.app.scripted_backend import ScriptedBackend
from tests.app.server.server_harness import running_server

anthropic = pytest.importorskip("anthropic")

KEY = "sekret"
WEATHER = {
    "name": "get_weather",
    "description": "Weather for a city",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"enum": ["Paris", "Rome"]}},
        "required": ["city"],
    },
}
HI = [{"role": "user", "content": "hi"}]


def _load(name: str) -> Any:
    if name == "fake":
        return load_engine(EngineOptions(model="fake", runner="fake", prefix_disk_bytes=0))
    if name == "thinker":  # a reasoning model: its template reads enable_thinking
        words = ["<thi", "nk>\nhmm, ", "rain?", "</think>", "\n\nIt ", "rains."]
        backend = ScriptedBackend(name, words)
        backend._info = replace(backend.info, features={"thinking_switch": True})
        return backend
    if name == "tiny":
        return ScriptedBackend(name, ["Hello", ",", " world", "!"])
    raise RegistryError(f"model {name!r} not found")


@pytest.fixture(scope="module")
def pool() -> ModelPool:
    names = ["fake", "thinker", "tiny"]
    aliases = ModelAliases.parse(["claude-haiku-*=thinker", "claude-*=tiny"])
    return ModelPool(_load, lambda: names, "tiny", 3, max_tokens_cap=4096, aliases=aliases)


@pytest.fixture(scope="module")
def server(pool: ModelPool) -> Iterator[str]:
    with running_server(pool, Guard(bind_host="127.0.0.1", api_key=KEY)) as url:
        yield url


def _client(url: str, **kwargs: Any) -> Any:
    return anthropic.Anthropic(base_url=url, api_key=KEY, max_retries=0, timeout=60, **kwargs)


def test_create_maps_the_request_and_shapes_the_message(server: str, pool: ModelPool) -> None:
    message = _client(server).messages.create(
        model="tiny",
        max_tokens=50,
        system=[{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        stop_sequences=["\n\nHuman:"],
        metadata={"user_id": "u1"},
        cache_control={"type": "ephemeral"},
        # the SDK (2.16) dropped these arguments; the API and Claude Code still send them
        extra_body={"temperature": 0.5, "top_p": 0.9, "top_k": 40},
    )
    assert (
        message.type == "message" and message.role == "assistant" and message.id.startswith("msg_")
    )
    assert [b.type for b in message.content] == ["text"] and message.content[
        0
    ].text == "Hello, world!"
    assert message.stop_reason == "end_turn" and message.stop_sequence is None
    assert message.usage.output_tokens == 4 and message.usage.input_tokens == 3
    assert message.usage.cache_read_input_tokens == 0
    sent = pool.get("tiny").requests[-1]  # type: ignore[attr-defined]
    pool.release("tiny")
    assert [(m.role, m.content) for m in sent.messages] == [("system", "Be brief."), ("user", "hi")]
    s = sent.sampling
    assert (s.temperature, s.top_p, s.top_k, s.stop, s.max_tokens) == (
        0.5,
        0.9,
        40,
        ("\n\nHuman:",),
        50,
    )
    assert sent.template_kwargs == {}  # no reasoning switch to turn: the scaffold stays


def test_stream_sends_the_documented_events(server: str) -> None:
    with httpx.stream(
        "POST", f"{server}/v1/messages", headers={"x-api-key": KEY, "anthropic-version": "2023-06-01"},
        json={"model": "tiny", "max_tokens": 20, "messages": HI, "stream": True},
    ) as response:  # fmt: skip
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in response.iter_lines() if line]
    kinds = [line[len("event: ") :] for line in lines if line.startswith("event: ")]
    datas = [json.loads(line[len("data: ") :]) for line in lines if line.startswith("data: ")]
    assert [d["type"] for d in datas] == kinds
    assert kinds[:3] == ["message_start", "ping", "content_block_start"]
    assert kinds[-4:] == [
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert datas[0]["message"]["content"] == [] and datas[0]["message"]["stop_reason"] is None
    text = "".join(d["delta"]["text"] for d in datas if d["type"] == "content_block_delta")
    assert text == "Hello, world!"
    final = datas[-2]
    assert final["delta"] == {"stop_reason": "end_turn", "stop_sequence": None}
    assert final["usage"]["output_tokens"] == 4 and final["usage"]["input_tokens"] == 3


def test_thinking_comes_back_as_thinking_blocks(server: str, pool: ModelPool) -> None:
    client = _client(server)
    ask: dict[str, Any] = {"model": "claude-haiku-4-5", "max_tokens": 2000, "messages": HI,
                           "thinking": {"type": "enabled", "budget_tokens": 1024}}  # fmt: skip
    whole = client.messages.create(**ask)
    assert [b.type for b in whole.content] == ["thinking", "text"]
    assert (
        whole.content[0].thinking == "hmm, rain?" and whole.content[1].text.strip() == "It rains."
    )
    assert whole.model == "thinker"  # the alias claude-haiku-* answered
    with client.messages.stream(**ask) as stream:
        kinds = [e.delta.type for e in stream if e.type == "content_block_delta"]
        final = stream.get_final_message()
    assert kinds[0] == "thinking_delta" and kinds[-1] == "text_delta"
    assert final.content[0].thinking.strip() == "hmm, rain?"
    sent = pool.get("thinker").requests[-1]  # type: ignore[attr-defined]
    pool.release("thinker")
    assert sent.template_kwargs == {"enable_thinking": True}


def test_any_tool_choice_returns_a_well_formed_tool_use(server: str) -> None:
    client = _client(server)
    ask: dict[str, Any] = {"model": "fake", "max_tokens": 200, "messages": HI, "tools": [WEATHER],
                           "tool_choice": {"type": "any"}}  # fmt: skip
    message = client.messages.create(**ask)
    assert message.stop_reason == "tool_use"
    use = message.content[-1]
    assert (
        use.type == "tool_use"
        and use.name == "get_weather"
        and use.input["city"] in ("Paris", "Rome")
    )
    with client.messages.stream(
        **{**ask, "tool_choice": {"type": "tool", "name": "get_weather"}}
    ) as s:
        deltas = [e.delta.type for e in s if e.type == "content_block_delta"]
        final = s.get_final_message()
    assert "input_json_delta" in deltas and final.stop_reason == "tool_use"
    assert final.content[-1].type == "tool_use" and final.content[-1].input["city"] in (
        "Paris",
        "Rome",
    )


THINK: dict[str, Any] = {"model": "claude-haiku-4-5", "max_tokens": 2000, "messages": HI,
                         "thinking": {"type": "enabled", "budget_tokens": 1024}}  # fmt: skip


def test_thinking_blocks_are_signed_and_checked_when_sent_back(server: str, tmp_path: Path) -> None:
    client = _client(server)
    whole = client.messages.create(**THINK)
    block = whole.content[0].model_dump()
    assert block["type"] == "thinking" and block["signature"]
    with client.messages.stream(**THINK) as stream:
        kinds = [e.delta.type for e in stream if e.type == "content_block_delta"]
        streamed = stream.get_final_message().content[0]
    # the signature ends its block, once, and signs the same text as the whole reply's
    assert kinds.count("signature_delta") == 1
    assert kinds[kinds.index("signature_delta") - 1] == "thinking_delta"
    assert kinds[kinds.index("signature_delta") + 1] == "text_delta"
    assert streamed.signature == block["signature"]

    def turn(thinking: dict[str, Any]) -> list[dict[str, Any]]:
        reply = [thinking, {"type": "text", "text": "It rains."}]
        return [*HI, {"role": "assistant", "content": reply}, {"role": "user", "content": "ok"}]

    again = client.messages.create(**THINK | {"messages": turn(block)})
    assert again.content[0].type == "thinking"  # sent back unchanged: accepted
    tokens = client.messages.count_tokens(model="tiny", messages=turn(block))
    assert tokens.input_tokens > 0
    edited = block | {"thinking": block["thinking"] + " (edited)"}
    unsigned = block | {"signature": ""}
    foreign = block | {"signature": ThinkingSigner(tmp_path / "k").sign(block["thinking"])}
    garbage = block | {"signature": "not base64!"}
    for bad in (edited, unsigned, foreign, garbage):
        with pytest.raises(anthropic.BadRequestError) as refused:
            client.messages.create(**THINK | {"messages": turn(bad)})
        message = refused.value.body["error"]["message"]
        assert message.startswith("messages[1].content[0].signature: does not verify")
    with pytest.raises(anthropic.BadRequestError) as refused:
        client.messages.count_tokens(model="tiny", messages=turn(edited))
    redacted = {"type": "redacted_thinking", "data": "EmwKAhgBEgy..."}
    with pytest.raises(anthropic.BadRequestError) as refused:
        client.messages.create(**THINK | {"messages": turn(redacted)})
    assert "redacted_thinking comes from Anthropic" in refused.value.body["error"]["message"]


def test_signatures_survive_a_restart_of_the_home(tmp_path: Path) -> None:
    first, second = ThinkingSigner(tmp_path / "k"), ThinkingSigner(tmp_path / "k")
    signature = first.sign("  why?\n")
    assert second.verifies("why?", signature)  # one home, one key; stripped text signed
    assert (tmp_path / "k").stat().st_mode & 0o777 == 0o600
    (tmp_path / "k").write_bytes(b"short")  # a broken key file is replaced, not trusted
    assert not ThinkingSigner(tmp_path / "k").verifies("why?", signature)
    assert len((tmp_path / "k").read_bytes()) == 32


def test_tool_result_round_trip_reaches_the_engine(server: str, pool: ModelPool) -> None:
    thinking = _client(server).messages.create(**THINK).content[0].model_dump()
    history = [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": [
            thinking,
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "is_error": True,
             "content": [{"type": "text", "text": "service down"}]},
            {"type": "text", "text": "Try again?"}]},
    ]  # fmt: skip
    message = _client(server).messages.create(
        model="tiny",
        max_tokens=20,
        messages=history,
        tools=[WEATHER],
    )
    assert message.stop_reason == "end_turn"
    sent = pool.get("tiny").requests[-1]  # type: ignore[attr-defined]
    pool.release("tiny")
    roles = [m.role for m in sent.messages]
    assert roles == ["user", "assistant", "tool", "user"]
    call = sent.messages[1].tool_calls[0]
    assert (call.id, call.name, json.loads(call.arguments)) == (
        "toolu_1",
        "get_weather",
        {"city": "Paris"},
    )
    tool = sent.messages[2]
    assert (tool.tool_call_id, tool.name, tool.content) == (
        "toolu_1",
        "get_weather",
        "Error: service down",
    )
    assert sent.tools[0].name == "get_weather" and sent.tool_choice == "auto"


def test_output_config_format_is_enforced_and_effort_switches_thinking(
    server: str, pool: ModelPool
) -> None:
    schema = {"type": "object", "properties": {"city": {"enum": ["Paris", "Rome"]}},
              "required": ["city"], "additionalProperties": False}  # fmt: skip
    message = _client(server).messages.create(
        model="fake", max_tokens=100, messages=HI,
        output_config={"format": {"type": "json_schema", "schema": schema}, "effort": "high"},
    )  # fmt: skip
    assert json.loads(message.content[0].text)["city"] in ("Paris", "Rome")
    for extra in ({"output_config": {"effort": "low"}}, {"thinking": {"type": "adaptive"}},
                  {"output_config": {"effort": "max"}}, {}):  # fmt: skip
        _client(server).messages.create(model="thinker", max_tokens=5, messages=HI, **extra)
    sent = pool.get("thinker").requests[-4:]  # type: ignore[attr-defined]
    pool.release("thinker")
    assert [r.template_kwargs for r in sent] == [
        {"enable_thinking": False}, {}, {"enable_thinking": True}, {"enable_thinking": False}
    ]  # fmt: skip


def test_count_tokens(server: str) -> None:
    counted = _client(server).messages.count_tokens(model="claude-sonnet-4-5", messages=HI)
    assert counted.input_tokens == 3  # the scripted backend's count


def _post(url: str, body: Any, path: str = "/v1/messages", **headers: str) -> httpx.Response:
    return httpx.post(f"{url}{path}", json=body, headers={"x-api-key": KEY, **headers}, timeout=30)


PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 16).decode()
CYCLIC = {"type": "object", "properties": {"a": {"$ref": "#"}}}


def _deep(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {"type": "object"}
    for _ in range(levels):
        value = {"type": "object", "properties": {"x": value}}
    return value


def _user(*blocks: Any) -> dict[str, Any]:
    return {
        "model": "tiny",
        "max_tokens": 5,
        "messages": [{"role": "user", "content": list(blocks)}],
    }


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"model": "tiny", "messages": HI}, "max_tokens"),
        ({"model": "tiny", "max_tokens": 5, "messages": HI, "temperature": 1.5}, "temperature"),
        ({"model": "tiny", "max_tokens": 5, "messages": HI, "top_p": 0}, "top_p"),
        ({"model": "tiny", "max_tokens": 10**6, "messages": HI}, "max_tokens"),
        ({"model": "tiny", "max_tokens": 5, "messages": HI, "stop_sequences": "x"}, "stop_sequences"),
        ({"model": "tiny", "max_tokens": 5, "messages": HI, "n": 2}, "n"),
        ({"model": "tiny", "max_tokens": 5, "messages": []}, "messages"),
        ({"model": "tiny", "max_tokens": 5, "messages": [{"role": "system", "content": "x"}]},
         "messages[0].role"),
        (_user({"type": "video", "url": "x"}), "messages[0].content[0].type"),
        (_user({"type": "text", "text": "x", "colour": 1}), "messages[0].content[0].colour"),
        (_user({"type": "tool_result", "tool_use_id": "nope", "content": "x"}),
         "messages[0].content[0].tool_use_id"),
        (_user({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "@@"}}),
         "messages[0].content[0].source.data"),
        (_user({"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": PNG}}),
         "messages[0].content[0].source.data"),
        (_user({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}),
         "takes text only"),
        ({**_user({"type": "text", "text": "x"}), "tools": [{**WEATHER, "input_schema": _deep(80)}]},
         "tools[0].input_schema"),
        ({**_user({"type": "text", "text": "x"}), "tools": [{**WEATHER, "input_schema": {
            "type": "object", "description": "x" * 300_000}}]}, "tools[0].input_schema"),
        ({**_user({"type": "text", "text": "x"}), "tools": [{"type": "bash_20250124", "name": "bash"}]},
         "tools[0].type"),
        ({**_user({"type": "text", "text": "x"}), "tools": [WEATHER], "tool_choice": {"type": "tool",
          "name": "nope"}}, "tool_choice.name"),
        ({**_user({"type": "text", "text": "x"}), "tool_choice": {"type": "any"}}, "tool_choice"),
        ({**_user({"type": "text", "text": "x"}), "thinking": {"type": "enabled", "budget_tokens": 10}},
         "thinking.budget_tokens"),
        ({**_user({"type": "text", "text": "x"}), "metadata": {"user_id": 5}}, "metadata"),
    ],
)  # fmt: skip
def test_bad_input_is_a_400_naming_the_field(server: str, body: Any, field: str) -> None:
    response = _post(server, body)
    assert response.status_code == 400, response.text
    error = response.json()
    assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    assert field in error["error"]["message"]


def test_hostile_bodies_are_4xx_and_the_server_goes_on(server: str) -> None:
    deep = '{"model": "tiny", "max_tokens": 5, "messages": ' + "[" * 5000 + "]" * 5000 + "}"
    response = httpx.post(f"{server}/v1/messages", content=deep, headers={"x-api-key": KEY})
    assert response.status_code == 400 and response.json()["type"] == "error"
    cyclic = {**_user({"type": "text", "text": "x"}), "model": "fake", "tools": [
        {**WEATHER, "input_schema": CYCLIC}], "tool_choice": {"type": "any"}}  # fmt: skip
    assert _post(server, cyclic).status_code < 500
    assert _post(server, {"model": "tiny", "max_tokens": 5, "messages": HI}).status_code == 200


def test_unknown_model_is_a_404_listing_the_served_models(server: str) -> None:
    with pytest.raises(anthropic.NotFoundError) as caught:
        _client(server).messages.create(model="gpt-4o", max_tokens=5, messages=HI)
    message = caught.value.body["error"]["message"]
    assert caught.value.body["error"]["type"] == "not_found_error"
    assert "fake, thinker, tiny" in message and "--alias" in message


def test_keys_bearer_or_x_api_key_and_anthropic_headers(server: str) -> None:
    body = {"model": "tiny", "max_tokens": 5, "messages": HI}
    beta = {"anthropic-version": "2023-06-01", "anthropic-beta": "prompt-caching-2024-07-31"}
    assert _post(server, body, **beta).status_code == 200
    ok = httpx.post(f"{server}/v1/messages", json=body, headers={"Authorization": f"Bearer {KEY}"})
    assert ok.status_code == 200
    refused = httpx.post(f"{server}/v1/messages", json=body, headers={"x-api-key": "wrong"})
    assert refused.status_code == 401
    assert refused.json()["error"]["type"] == "authentication_error"
    with pytest.raises(anthropic.AuthenticationError):
        anthropic.Anthropic(base_url=server, api_key="wrong", max_retries=0).messages.create(
            model="tiny",
            max_tokens=5,
            messages=HI,
        )
    # auth_token is what Claude Code's ANTHROPIC_AUTH_TOKEN sends: Authorization: Bearer
    client = anthropic.Anthropic(base_url=server, auth_token=KEY, max_retries=0)
    assert client.messages.create(model="claude-sonnet-4-5", max_tokens=5, messages=HI).content


def test_openai_errors_keep_their_shape(server: str) -> None:
    refused = httpx.post(f"{server}/v1/chat/completions", json={}, headers={"x-api-key": "wrong"})
    assert refused.status_code == 401 and "type" not in refused.json()


def test_pings_keep_a_slow_stream_alive(
    pool: ModelPool, server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ember.app.server.anthropic import stream

    monkeypatch.setattr(stream, "PING_S", 0.05)
    slow = ScriptedBackend("slow", ["a", "b"], delay_s=0.5)
    monkeypatch.setattr(pool, "_load", lambda name: slow)
    monkeypatch.setattr(pool, "_is_served", lambda name: name == "slow")
    try:
        body = {"model": "slow", "max_tokens": 5, "messages": HI, "stream": True}
        with httpx.stream("POST", f"{server}/v1/messages", json=body,
                          headers={"x-api-key": KEY}) as response:  # fmt: skip
            kinds = [line[7:] for line in response.iter_lines() if line.startswith("event: ")]
    finally:
        pool.unload("slow")
    first_text = kinds.index("content_block_start")
    assert kinds.count("ping") >= 3 and "ping" in kinds[2:first_text]  # while "prefilling"
    assert kinds[-2:] == ["message_delta", "message_stop"]


def test_guard_refusals_take_anthropics_shape(server: str) -> None:
    too_big = httpx.post(f"{server}/v1/messages", content=b"x" * (2 << 20),
                         headers={"x-api-key": KEY})  # fmt: skip
    assert too_big.status_code == 413
    assert too_big.json()["error"]["type"] == "request_too_large"
    foreign = httpx.post(f"{server}/v1/messages/count_tokens", json={},
                         headers={"x-api-key": KEY, "Origin": "https://evil.example"})  # fmt: skip
    assert foreign.status_code == 403 and foreign.json()["error"]["type"] == "permission_error"
