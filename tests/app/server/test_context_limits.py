"""Requests that cannot fit the context (issue 25): an oversized tool set is refused up front
with the token count it needs, before any grammar is compiled or any prefill spins, and the
engine answers the next chat. The real app under uvicorn, a real EngineThread over the fake
runner (its FakeChat renders tools in Ember's generic format)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest

from tests.app.server.server_harness import fake_engine_server

CTX = 1024


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with fake_engine_server(CTX, max_tokens_cap=64) as url:
        yield url


def _tools(count: int) -> list[dict[str, object]]:
    pattern = {"type": "string", "pattern": "^[a-z]{3,8}-[0-9]{2,4}$"}
    return [
        {"type": "function", "function": {
            "name": f"tool_{i}", "description": "looks something up " * 4,
            "parameters": {"type": "object", "properties": {"q": pattern}, "required": ["q"]}}}
        for i in range(count)
    ]  # fmt: skip


@pytest.mark.parametrize("choice", ["auto", "required"])
def test_a_tool_set_past_the_context_is_refused_with_its_token_count(
    server: str, choice: str
) -> None:
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4,
            "tools": _tools(128), "tool_choice": choice}  # fmt: skip
    reply = httpx.post(f"{server}/v1/chat/completions", json=body, timeout=60)
    assert reply.status_code == 400, reply.text
    message = reply.json()["error"]["message"]
    need = re.search(r"need (\d+) prompt tokens; the context holds (\d+)", message)
    assert need and int(need.group(1)) > CTX and int(need.group(2)) == CTX
    ollama = {"model": "fake", "messages": [{"role": "user", "content": "hi"}],
              "tools": _tools(128), "stream": False}  # fmt: skip
    reply = httpx.post(f"{server}/api/chat", json=ollama, timeout=60)
    assert reply.status_code == 400 and "prompt tokens" in reply.json()["error"]
    small = body | {"tools": _tools(1)}
    assert httpx.post(f"{server}/v1/chat/completions", json=small, timeout=60).status_code == 200
