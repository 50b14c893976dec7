"""Speculative decoding stays exact with DRY on: verification penalizes exactly like sampling."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ember.engine.api import GenerationRequest, SamplingParams
from ember.engine.dry import DryBreakers, breakers_for
from ember.engine.runners.fake import FakeRunner, FakeTokenizer
from ember.engine.sampling import sample_token
from ember.engine.speculative.adaptive import AdaptiveDraftLength
from ember.engine.speculative.draft_model import DraftModelProposer
from ember.engine.speculative.lookup import PromptLookupProposer
from ember.engine.speculative.verify import sampling_probs
from tests.engine.helpers import greedy, run
from tests.engine.speculative.spec_helpers import CopyingFakeRunner, repetitive_prompt, spec_engine

DRY: dict[str, Any] = {"dry_multiplier": 2.0, "dry_base": 1.75, "dry_allowed_length": 2}


def _dry_greedy_reference(runner: FakeRunner, prompt: list[int], count: int) -> list[int]:
    """Plain greedy with DRY, one contiguous context (what the engine must reproduce)."""
    params = greedy(count, **DRY)
    breakers = breakers_for(runner.tokenizer, params.dry_sequence_breakers)
    context, out = list(prompt), []
    for _ in range(count):
        token = sample_token(runner.reference_logits(context), params, context, dry=breakers)
        out.append(token)
        context.append(token)
    return out


def test_lookup_greedy_with_dry_equals_plain_greedy_with_dry() -> None:
    prompt = list(repetitive_prompt(60))
    request = GenerationRequest(prompt_ids=tuple(prompt), sampling=greedy(40, **DRY))
    plain = run(spec_engine(CopyingFakeRunner(), None), request)
    runner = CopyingFakeRunner()
    drafted = run(spec_engine(runner, PromptLookupProposer(), draft_tokens=5), request)
    assert drafted.stats.drafted_tokens > 0
    assert list(drafted.token_ids) == list(plain.token_ids)
    assert list(plain.token_ids) == _dry_greedy_reference(runner, prompt, 40)
    no_dry = run(spec_engine(CopyingFakeRunner(), None), replace(request, sampling=greedy(40)))
    assert no_dry.token_ids != plain.token_ids  # DRY changed this copying output


def test_draft_model_greedy_with_dry_equals_plain() -> None:
    prompt = list(repetitive_prompt(45))
    target = CopyingFakeRunner(seed=0)
    draft = DraftModelProposer(CopyingFakeRunner(seed=0), block_size=4)
    engine = spec_engine(target, draft, draft_tokens=4)
    request = GenerationRequest(prompt_ids=tuple(prompt), sampling=greedy(30, **DRY))
    final = run(engine, request)
    assert final.stats.drafted_tokens > 0
    assert list(final.token_ids) == _dry_greedy_reference(target, prompt, 30)


def test_lookup_sampling_with_dry_is_the_plain_sampled_run() -> None:
    params = SamplingParams(temperature=0.8, top_k=5, seed=3, max_tokens=30, ignore_eos=True, **DRY)
    request = GenerationRequest(prompt_ids=repetitive_prompt(40), sampling=params)
    plain = run(spec_engine(CopyingFakeRunner(), None), request)
    proposer = PromptLookupProposer(adaptive=AdaptiveDraftLength(4, enabled=False))
    drafted = run(spec_engine(CopyingFakeRunner(), proposer, draft_tokens=4), request)
    assert drafted.stats.drafted_tokens > 0 and drafted.token_ids == plain.token_ids


def test_verification_distribution_includes_the_dry_penalty() -> None:
    tok = FakeTokenizer()
    logits = np.zeros(tok.vocab_size, dtype=np.float32)
    a, b, c = 40, 41, 42
    logits[c] = 1.0
    history = [a, b, c, a, b]
    params = SamplingParams(temperature=1.0, **DRY)
    breakers = DryBreakers.none(tok.vocab_size)
    with_dry = sampling_probs(logits, params, history, breakers)
    without = sampling_probs(logits, SamplingParams(temperature=1.0), history)
    assert with_dry[c] < without[c]  # c would repeat "a b c": penalized in verification too
