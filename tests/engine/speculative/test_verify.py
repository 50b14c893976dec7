"""Verification rule (speculative/verify.py), the --draft choice (choice.py) and prompt lookup
(lookup.py), on FakeRunners."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ember.engine.api import EngineOptions, GenerationRequest, SamplingParams
from ember.engine.errors import EngineError
from ember.engine.runners.fake import FakeRunner
from ember.engine.speculative.adaptive import AdaptiveDraftLength
from ember.engine.speculative.choice import create_proposer
from ember.engine.speculative.lookup import NgramIndex, PromptLookupProposer
from ember.engine.speculative.verify import draw, sampling_probs, verify_sampled
from tests.engine.helpers import greedy, reference_greedy, run
from tests.engine.speculative.spec_helpers import CopyingFakeRunner, repetitive_prompt, spec_engine


# ---- the sampling distribution ------------------------------------------------------------
def test_sampling_probs_match_sample_token_draws() -> None:
    from ember.engine.sampling import sample_token

    logits = np.array([2.0, 1.5, 0.3, -1.0, 0.9], dtype=np.float32)
    params = SamplingParams(temperature=0.7, top_k=3, seed=1)
    probs = sampling_probs(logits, params)
    assert probs[3] == 0.0 and probs[2] == 0.0 and math.isclose(probs.sum(), 1.0)
    rng = np.random.default_rng(5)
    counts = np.bincount([sample_token(logits, params, (), rng) for _ in range(4000)], minlength=5)
    assert np.abs(counts / 4000 - probs).max() < 0.03  # 4 sigma of a 4000-draw frequency
    assert sampling_probs(logits, SamplingParams()).tolist() == [1.0, 0.0, 0.0, 0.0, 0.0]


# ---- verify_sampled: exactness by a chi-square test -----------------------------------------
VOCAB = 5
_W_TARGET = np.random.default_rng(21).standard_normal((VOCAB, VOCAB)) * 1.5
_W_DRAFT = np.random.default_rng(22).standard_normal((VOCAB, VOCAB)) * 1.5


def _logits(weights: np.ndarray, context: list[int]) -> np.ndarray:
    # a tiny bigram-ish model: logits depend on the last token and the context length
    return weights[context[-1]] + 0.3 * len(context) * np.arange(VOCAB) / VOCAB


def _speculative_pair(params: SamplingParams, rng: np.random.Generator, k: int) -> tuple[int, int]:
    """Generate until two tokens exist, with k drafts per step sampled from the draft model."""
    out: list[int] = []
    context = [0]
    while len(out) < 2:
        drafts: list[int] = []
        q_rows: list[np.ndarray] = []
        for _ in range(k):
            q = sampling_probs(_logits(_W_DRAFT, context + drafts), params)
            drafts.append(draw(q, rng))
            q_rows.append(q)
        rows = np.stack([_logits(_W_TARGET, context + drafts[:i]) for i in range(k + 1)])
        kept = verify_sampled(rows, drafts, np.stack(q_rows), params, context, rng)
        out += kept
        context += kept
    return out[0], out[1]


def _joint(weights: np.ndarray, params: SamplingParams) -> np.ndarray:
    first = sampling_probs(_logits(weights, [0]), params)
    return np.stack(
        [first[x] * sampling_probs(_logits(weights, [0, x]), params) for x in range(VOCAB)]
    )


def _chi_square(counts: np.ndarray, probs: np.ndarray) -> tuple[float, int]:
    total = counts.sum()
    cells = probs > 0
    assert counts[~cells].sum() == 0, "a token the target can never emit was emitted"
    expected = probs[cells] * total
    return float(((counts[cells] - expected) ** 2 / expected).sum()), int(cells.sum()) - 1


def _chi2_quantile_999(dof: int) -> float:
    # Wilson-Hilferty: chi2_q(dof) ~ dof * (1 - 2/(9 dof) + z_q sqrt(2/(9 dof)))^3, z_0.999 = 3.09
    c = 2 / (9 * dof)
    return dof * (1 - c + 3.09 * math.sqrt(c)) ** 3


@pytest.mark.parametrize("k", [1, 3])
def test_sampled_verification_keeps_the_target_distribution(k: int) -> None:
    """Joint law of the first two tokens == the target's (chi-square at the 0.999 quantile).

    With a correct rule the statistic is chi-square(dof) distributed, so a fixed seed passes with
    probability 0.999; the draft's own law (what accepting every draft would give) is rejected
    by a wide margin at the same sample size, so the test can tell them apart.
    """
    params = SamplingParams(temperature=0.9, top_k=4)
    rng = np.random.default_rng(1234 + k)
    trials = 3000
    counts = np.zeros((VOCAB, VOCAB))
    for _ in range(trials):
        counts[_speculative_pair(params, rng, k)] += 1
    stat, dof = _chi_square(counts.ravel(), _joint(_W_TARGET, params).ravel())
    assert stat < _chi2_quantile_999(dof), (stat, dof)
    draft_law = _joint(_W_DRAFT, params).ravel()
    mixed = 0.5 * draft_law + 0.5 * _joint(_W_TARGET, params).ravel()  # no zero cells
    assert _chi_square(counts.ravel(), mixed)[0] > 5 * _chi2_quantile_999(dof)


def test_rejection_samples_from_the_residual() -> None:
    # q puts all mass on token 0, p(0) = 0.2: reject with 0.8 and then draw from p without 0
    p_logits = np.log(np.array([0.2, 0.5, 0.3]))
    rows = np.stack([p_logits, p_logits])
    q = np.array([[1.0, 0.0, 0.0]])
    rng = np.random.default_rng(0)
    params = SamplingParams(temperature=1.0)
    firsts = [verify_sampled(rows, [0], q, params, [], rng)[0] for _ in range(5000)]
    freq = np.bincount(firsts, minlength=3) / 5000
    assert np.abs(freq - [0.2, 0.5, 0.3]).max() < 0.025


# ---- prompt lookup --------------------------------------------------------------------------
def test_ngram_index_finds_the_latest_longest_match() -> None:
    index = NgramIndex(min_ngram=1, max_ngram=3)
    tokens = [5, 6, 7, 8, 9, 5, 6, 7, 1, 2, 6, 7]
    index.update(tokens)
    assert index.lookup(tokens, 3) == [1, 2, 6]  # "6 7" last seen before "1"; "5 6 7" absent
    tokens += [1]
    index.update(tokens)
    assert index.lookup(tokens, 2) == [2, 6]  # 3-gram "6 7 1"
    assert NgramIndex(2, 3).lookup([1, 2, 3], 4) == []


def test_lookup_greedy_output_equals_plain_greedy() -> None:
    prompt = repetitive_prompt(60)
    request = GenerationRequest(prompt_ids=prompt, sampling=greedy(40))
    plain = run(spec_engine(CopyingFakeRunner(), None), request)
    runner = CopyingFakeRunner()
    engine = spec_engine(runner, PromptLookupProposer(), draft_tokens=5)
    final = run(engine, GenerationRequest(prompt_ids=prompt, sampling=greedy(40)))
    assert list(final.token_ids) == list(plain.token_ids)
    assert list(final.token_ids) == reference_greedy(runner, list(prompt), 40)
    stats = final.stats
    assert stats.drafted_tokens > 0 and 0 < stats.accepted_tokens < stats.drafted_tokens
    assert runner.num_forward_calls < 40  # fewer target forwards than tokens
    engine.blocks.check_invariants()
    assert engine.blocks.num_used_blocks == 0


def test_lookup_rolls_back_the_target_kv_of_rejected_drafts() -> None:
    runner = CopyingFakeRunner()
    engine = spec_engine(runner, PromptLookupProposer(), draft_tokens=6)
    request = GenerationRequest(prompt_ids=repetitive_prompt(50), sampling=greedy(30))
    engine.add_request(request, lambda event: None)
    rejected_steps = 0
    while engine.has_work:
        engine.step()
        for seq in engine.scheduler.running:
            # after verification the table holds exactly the kept tokens: no block of a rejected
            # draft survives, and the pending token is the only one not yet in the cache
            assert len(seq.block_table) == engine.blocks.blocks_for(seq.num_kv_tokens)
            assert seq.num_pending == 1
            rejected_steps += 1
        engine.blocks.check_invariants()
    assert rejected_steps > 0


def test_lookup_sampling_is_reproducible_and_matches_plain() -> None:
    # point-mass drafts: the engine samples every position from the target with the request's
    # generator, so a seeded sampled run gives the same tokens with or without drafting
    params = SamplingParams(temperature=0.8, top_k=5, seed=3, max_tokens=30, ignore_eos=True)
    prompt = repetitive_prompt(40)
    plain = run(
        spec_engine(CopyingFakeRunner(), None),
        GenerationRequest(prompt_ids=prompt, sampling=params),
    )
    proposer = PromptLookupProposer(adaptive=AdaptiveDraftLength(4, enabled=False))
    drafted = run(
        spec_engine(CopyingFakeRunner(), proposer, draft_tokens=4),
        GenerationRequest(prompt_ids=prompt, sampling=params),
    )
    assert drafted.stats.drafted_tokens > 0
    assert drafted.token_ids == plain.token_ids


def test_create_proposer_choices() -> None:
    runner = FakeRunner()
    options = EngineOptions(model="fake", draft="none")
    assert create_proposer(options, runner) is None
    for choice in ("lookup", "auto"):
        proposer = create_proposer(EngineOptions(model="fake", draft=choice), runner)
        assert isinstance(proposer, PromptLookupProposer)
    with pytest.raises(EngineError, match="torch runner"):
        create_proposer(EngineOptions(model="fake", draft="self"), runner)
    with pytest.raises(EngineError, match="not resolved"):  # app resolves a draft model
        create_proposer(EngineOptions(model="fake", draft="/nope/missing.gguf"), runner)


def test_auto_is_off_where_verification_is_not_batch_invariant() -> None:
    from dataclasses import replace

    runner = FakeRunner()
    runner.info = replace(runner.info, name="llama.cpp")
    assert create_proposer(EngineOptions(model="x", draft="auto"), runner) is None
    explicit = create_proposer(EngineOptions(model="x", draft="lookup"), runner)
    assert isinstance(explicit, PromptLookupProposer)
