"""Fuzz: any prompt text, message list or sampling value ends its request cleanly, and the
engine still answers afterwards (a real ChatTemplate over the fake runner's tokenizer)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ember.engine.api import ChatMessage, Finished, GenerationRequest, SamplingParams
from ember.engine.engine import Engine
from ember.engine.engine_thread import EngineThread
from ember.engine.errors import EngineError
from ember.engine.runners.fake import FakeRunner
from ember.models.text.templates.chat_template import ChatTemplate
from tests.engine.helpers import make_engine
from tests.fixtures.tiny_hf import QWEN3_TEMPLATE
from tests.fuzz import FUZZ, nasty_text

GEMMA_LIKE = ChatTemplate.for_architecture("gemma3", "<bos>", "<eos>")
QWEN3 = ChatTemplate(QWEN3_TEMPLATE, "tiny qwen3")


@pytest.fixture(scope="module")
def backend() -> Iterator[EngineThread]:
    runner = FakeRunner()
    template = {"t": GEMMA_LIKE}

    def chat(messages: Sequence[ChatMessage]) -> list[int]:
        dicts = [{"role": m.role, "content": m.content} for m in messages]
        return template["t"].render_ids(runner.tokenizer, dicts)

    engine = Engine(runner, make_engine(window=0, ctx=4096).options, chat=chat)
    thread = EngineThread(engine)
    thread.template = template  # type: ignore[attr-defined]  # the test switches templates
    yield thread
    thread.close()


def _still_answers(backend: EngineThread) -> None:
    fin = backend.submit(GenerationRequest(prompt="ok", sampling=SamplingParams(max_tokens=2)))
    assert fin.result().reason == "length"
    assert backend.health().ok
    assert backend.call(lambda e: e.blocks.num_used_blocks) == 0


# What the engine says when it caught an exception it did not expect: a bug, even if contained.
UNEXPECTED = ("request failed:", "engine step failed:", "engine thread stopped:")


def _clean_end(fin: Finished) -> None:
    assert fin.reason in ("stop", "length", "error")
    if fin.reason == "error":  # an expected refusal: one line, never an unexpected exception
        assert fin.error and "\n" not in fin.error and not fin.error.startswith(UNEXPECTED)


roles = st.sampled_from(["system", "user", "assistant"])
messages = st.lists(st.tuples(roles, nasty_text), min_size=1, max_size=5)


@FUZZ
@given(text=nasty_text)
def test_raw_prompts(backend: EngineThread, text: str) -> None:
    try:
        request = GenerationRequest(prompt=text, sampling=SamplingParams(max_tokens=3))
    except EngineError:
        return
    _clean_end(backend.submit(request).result())
    _still_answers(backend)


@FUZZ
@given(turns=messages, qwen=st.booleans())
def test_chat_messages(backend: EngineThread, turns: list[tuple[Any, str]], qwen: bool) -> None:
    backend.template["t"] = QWEN3 if qwen else GEMMA_LIKE  # type: ignore[attr-defined]
    chat = tuple(ChatMessage(role, text) for role, text in turns)
    fin = backend.submit(GenerationRequest(messages=chat, sampling=SamplingParams(max_tokens=3)))
    _clean_end(fin.result())
    _still_answers(backend)


@FUZZ
@given(
    temperature=st.floats(allow_nan=True, allow_infinity=True),
    top_p=st.floats(allow_nan=True),
    top_k=st.integers(-5, 1 << 40),
    seed=st.one_of(st.none(), st.integers(-(1 << 70), 1 << 70)),
    stop=st.lists(nasty_text, max_size=3),
)
def test_sampling_values(
    backend: EngineThread,
    temperature: float,
    top_p: float,
    top_k: int,
    seed: int | None,
    stop: list[str],
) -> None:
    try:
        params = SamplingParams(
            temperature=temperature, top_p=top_p, top_k=top_k, seed=seed, stop=tuple(stop),
            max_tokens=3,
        )  # fmt: skip
    except EngineError as exc:  # refused at construction: one line naming the field
        assert str(exc).startswith("sampling ") and "\n" not in str(exc)
        return
    _clean_end(backend.submit(GenerationRequest(prompt="hi", sampling=params)).result())
    _still_answers(backend)
