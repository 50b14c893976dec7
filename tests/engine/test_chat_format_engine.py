"""The engine applies a ChatFormat's extras: the scaffold's stop strings and reply lstrip."""

from __future__ import annotations

from ember.engine.api import ChatMessage, EngineOptions, GenerationRequest, SamplingParams
from ember.engine.engine import Engine
from ember.engine.runners.fake import FakeTokenizer
from ember.models.text.chat_format import scaffold_format
from tests.engine.helpers import ScriptedRunner, run


def _engine(reply: str) -> Engine:
    tok = FakeTokenizer()
    runner = ScriptedRunner(tok.encode(reply))
    chat = scaffold_format(runner.tokenizer, "test")
    return Engine(runner, EngineOptions(model="fake", prefix_disk_bytes=0), chat=chat)


def test_scaffold_reply_ends_at_the_next_user_turn() -> None:
    engine = _engine(" Paris.\nUser: and what about Rome?\nAssistant: Rome is")
    messages = (ChatMessage("user", "What is the capital of France?"),)
    final = run(
        engine, GenerationRequest(messages=messages, sampling=SamplingParams(max_tokens=64))
    )
    assert (final.reason, final.text) == ("stop", "Paris.")
    assert engine.info.features["base_chat"]


def test_raw_prompts_get_no_scaffold_stops() -> None:
    engine = _engine(" Paris.\nUser: more")
    final = run(engine, GenerationRequest(prompt="x", sampling=SamplingParams(max_tokens=64)))
    assert final.text == " Paris.\nUser: more"  # nor the lstrip: raw text is the model's own
