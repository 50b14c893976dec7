"""The reasoning budget through a real server and the real engine, over a fake model that would
think forever (tests/engine/thinking_runner.py): Anthropic's thinking.budget_tokens and the
Responses API's reasoning.effort end its <think> block, and the answer follows."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ember.app.server.pool import ModelPool
from ember.app.server.security import Guard
from ember.engine.api import EngineOptions
from ember.engine.engine import Engine
from ember.engine.engine_thread import EngineThread
from ember.engine.runners.fake import FakeChat
from tests.app.server.server_harness import running_server
from tests.engine.thinking_runner import THOUGHT, ThinkingFakeRunner

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")

ASK = [{"role": "user", "content": "weather?"}]


def _ponder(name: str) -> EngineThread:
    runner = ThinkingFakeRunner()
    options = EngineOptions(model=name, runner="fake", prefix_disk_bytes=0)
    return EngineThread(Engine(runner, options, chat=FakeChat(runner.tokenizer), model_name=name))


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    pool = ModelPool(_ponder, lambda: ["ponder"], "ponder", max_tokens_cap=4096)
    try:
        with running_server(pool, Guard(bind_host="127.0.0.1")) as base:
            yield base
    finally:
        pool.close()


def test_anthropic_budget_tokens_end_the_thinking_block(url: str) -> None:
    client = anthropic.Anthropic(base_url=url, api_key="unused", max_retries=0, timeout=120)
    ask: dict[str, Any] = {"model": "ponder", "max_tokens": 1100, "messages": ASK}
    reply = client.messages.create(**ask, thinking={"type": "enabled", "budget_tokens": 1024})
    assert [b.type for b in reply.content] == ["thinking", "text"]
    thought = reply.content[0].thinking
    assert thought == THOUGHT[:1024].decode().strip()  # one byte per token
    assert reply.content[1].text == "It rains." and reply.stop_reason == "end_turn"
    unbounded = client.messages.create(**ask)  # no budget: it thinks until max_tokens
    assert unbounded.stop_reason == "max_tokens" and unbounded.content[0].type == "thinking"


@pytest.mark.parametrize(("effort", "reasoning_chars"), [("low", 50), ("minimal", 0)])
def test_responses_effort_bounds_the_reasoning(url: str, effort: str, reasoning_chars: int) -> None:
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=60)
    reply = client.responses.create(
        model="ponder", input="weather?", max_output_tokens=100, reasoning={"effort": effort}
    )  # low: min(1024, 100 // 2) tokens of reasoning; minimal: none
    assert reply.status == "completed" and reply.output_text == "It rains."
    reasoning = [item for item in reply.output if item.type == "reasoning"]
    text = reasoning[0].content[0].text if reasoning and reasoning[0].content else ""
    assert text == THOUGHT[:reasoning_chars].decode().strip()
