"""The reasoning budget through the real engine over a fake model that would think forever:
the <think> block holds at most budget tokens, then the engine forces </think> and the model
answers; drafts are verified against the forced tokens; no budget, or no block, changes nothing."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ember.engine.api import ChatMessage, GenerationRequest, SamplingParams
from ember.engine.errors import EngineError
from ember.engine.reasoning_budget import ReasoningBudget
from ember.engine.runners.fake import FakeTokenizer
from ember.engine.speculative.lookup import PromptLookupProposer
from ember.models.text.think_splitter import split_thinking
from tests.engine.helpers import make_engine, run
from tests.engine.speculative.spec_helpers import spec_engine
from tests.engine.thinking_runner import THOUGHT, ThinkingFakeRunner

ASK = (ChatMessage("user", "weather?"),)


def _ask(budget: int | None, max_tokens: int = 200, **sampling: object) -> GenerationRequest:
    params = SamplingParams(max_tokens=max_tokens, reasoning_budget=budget, **sampling)  # type: ignore[arg-type]
    return GenerationRequest(messages=ASK, sampling=params)


def _raw(budget: int, **sampling: object) -> GenerationRequest:
    """The same ask as raw text (an engine without a chat renderer)."""
    params = SamplingParams(max_tokens=200, reasoning_budget=budget, **sampling)  # type: ignore[arg-type]
    return GenerationRequest(prompt="user: weather? assistant: ", sampling=params)


@pytest.mark.parametrize("budget", [0, 1, 7, 30])
def test_the_block_holds_at_most_budget_tokens_then_the_answer_follows(budget: int) -> None:
    final = run(make_engine(ThinkingFakeRunner()), _ask(budget))
    reasoning, content = split_thinking(final.text)
    assert final.reason == "stop" and content == "It rains."
    assert reasoning == THOUGHT[:budget].decode().strip()  # one byte per token
    think = final.token_ids[len(b"<think>") : final.text.index("</think>")]
    assert len(think) == budget


def test_without_a_budget_the_model_thinks_until_max_tokens() -> None:
    final = run(make_engine(ThinkingFakeRunner()), _ask(None, max_tokens=60))
    assert final.reason == "length" and "</think>" not in final.text


def test_sampled_and_drafted_decoding_force_the_same_close() -> None:
    for proposer in (None, PromptLookupProposer()):
        engine = spec_engine(ThinkingFakeRunner(), proposer)
        final = run(engine, _raw(12, temperature=0.8, seed=3))
        reasoning, content = split_thinking(final.text)
        assert len(reasoning) <= 12 and content == "It rains."
        if proposer is not None:
            assert final.stats.drafted_tokens > 0  # "It rains." and digits: lookup drafts


def test_a_prompt_that_opens_the_block_counts_from_the_first_token() -> None:
    tokenizer = FakeTokenizer()
    opened = tokenizer.encode("assistant: <think>\n")
    closed = tokenizer.encode("<think>\n\n</think>\n\n")
    budget = ReasoningBudget.create(tokenizer, 2, opened)
    assert budget.inside and budget.forced_token() is None
    budget.advance(tokenizer.encode("a")[0])
    budget.advance(tokenizer.encode("b")[0])
    assert budget.forced_token() == tokenizer.encode("<")[0]
    assert not ReasoningBudget.create(tokenizer, 2, closed).inside


def test_a_reply_without_a_block_is_untouched() -> None:
    plain = GenerationRequest(prompt="hello", sampling=SamplingParams(max_tokens=24))
    budgeted = replace(plain, sampling=SamplingParams(max_tokens=24, reasoning_budget=0))
    assert run(make_engine(), plain).token_ids == run(make_engine(), budgeted).token_ids


@pytest.mark.parametrize("value", [-1, 1 << 21])
def test_a_bad_budget_names_the_field(value: int) -> None:
    with pytest.raises(EngineError, match="reasoning_budget"):
        SamplingParams(reasoning_budget=value)
