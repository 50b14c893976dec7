"""The engine applies the scaffold's extras (stop strings at the next turn, reply lstrip) to the
chats it renders, and sends tool requests through the model's template without them."""

from __future__ import annotations

import pytest

from ember.engine.api import (
    ChatMessage,
    EngineOptions,
    GenerationRequest,
    SamplingParams,
    ToolSpec,
)
from ember.engine.engine import Engine
from ember.engine.errors import EngineError
from ember.engine.runners.fake import FakeChat, FakeTokenizer
from ember.models.text.chat_format import ScaffoldChat
from tests.engine.helpers import ScriptedRunner, run

QUESTION = (ChatMessage("user", "What is the capital of France?"),)
WEATHER = ToolSpec("get_weather", "the weather", {"type": "object"})


def _engine(reply: str, *, template: bool = False) -> Engine:
    tok = FakeTokenizer()
    runner = ScriptedRunner(tok.encode(reply))
    chat = ScaffoldChat(runner.tokenizer, "test", FakeChat(tok) if template else None)
    return Engine(runner, EngineOptions(model="fake", prefix_disk_bytes=0), chat=chat)


def test_scaffold_reply_ends_at_the_next_user_turn() -> None:
    engine = _engine(" Paris.\nUser: and what about Rome?\nAssistant: Rome is")
    final = run(
        engine, GenerationRequest(messages=QUESTION, sampling=SamplingParams(max_tokens=64))
    )
    assert (final.reason, final.text) == ("stop", "Paris.")
    assert engine.info.features["base_chat"]


def test_raw_prompts_get_no_scaffold_stops() -> None:
    engine = _engine(" Paris.\nUser: more")
    final = run(engine, GenerationRequest(prompt="x", sampling=SamplingParams(max_tokens=64)))
    assert final.text == " Paris.\nUser: more"  # nor the lstrip: raw text is the model's own


def test_tool_requests_render_through_the_template_without_scaffold_stops() -> None:
    reply = ' {"name": "get_weather"}\nUser: x'
    engine = _engine(reply, template=True)
    assert engine.info.tool_format == "generic"  # the template's (FakeChat's) format
    request = GenerationRequest(
        messages=QUESTION, tools=(WEATHER,), sampling=SamplingParams(max_tokens=64)
    )
    assert engine.encode(request) == FakeChat(FakeTokenizer())(QUESTION, tools=(WEATHER,))
    assert run(engine, request).text == reply  # no scaffold stop, no lstrip
    plain = GenerationRequest(messages=QUESTION, sampling=SamplingParams(max_tokens=64))
    assert engine.encode(plain) == ScaffoldChat(FakeTokenizer())(QUESTION)


def test_a_scaffold_without_a_template_refuses_tools() -> None:
    engine = _engine("x")
    request = GenerationRequest(messages=QUESTION, tools=(WEATHER,))
    with pytest.raises(EngineError, match="takes no tools"):
        engine.encode(request)
