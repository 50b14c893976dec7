"""DraftModelProposer (speculative/draft_model.py): exactness, KV rollback in the draft, tokenizer check."""

from __future__ import annotations

import numpy as np
import pytest

from ember.engine.api import EngineOptions, GenerationRequest, SamplingParams
from ember.engine.errors import EngineError
from ember.engine.runners.fake import FakeRunner, FakeTokenizer
from ember.engine.sequence import Sequence
from ember.engine.speculative.adaptive import AdaptiveDraftLength
from ember.engine.speculative.choice import _draft_proposer
from ember.engine.speculative.draft_model import DraftModelProposer, check_same_tokenizer
from ember.engine.speculative.verify import sampling_probs
from tests.engine.helpers import greedy, prompt_ids, reference_greedy, run, run_all
from tests.engine.speculative.spec_helpers import (
    CopyingFakeRunner,
    PerturbedFakeRunner,
    repetitive_prompt,
    spec_engine,
)


class CheckedDraft(DraftModelProposer):
    """Checks every proposal against a from-scratch greedy run of the draft model: any stale KV
    (a rejected draft left in the cache, a wrong slot after rollback) changes the draft's logits."""

    def __init__(self, runner: FakeRunner, **kwargs: object) -> None:
        super().__init__(runner, block_size=4, **kwargs)  # type: ignore[arg-type]
        self.fake = runner
        self.num_checked = 0

    def propose(self, seq: Sequence, max_tokens: int) -> list[int]:
        drafts = super().propose(seq, max_tokens)
        if drafts and seq.sampling.temperature == 0.0:
            assert drafts == reference_greedy(self.fake, seq.token_ids, len(drafts))
            cached = self.cached_token_ids(seq.seq_id)
            assert cached == seq.token_ids + drafts[:-1]  # the target's tokens, then the drafts
            # blocks: the cached tokens, plus room reserved for drafts cut short by an end token
            table = self._mirrors[seq.seq_id].seq.block_table
            reserved = self.blocks.blocks_for(len(seq.token_ids) + max_tokens - 1)
            assert self.blocks.blocks_for(len(cached)) <= len(table) <= reserved
            self.num_checked += 1
        self.blocks.check_invariants()
        return drafts


def test_draft_greedy_output_equals_plain_greedy() -> None:
    prompt = repetitive_prompt(45)
    target = CopyingFakeRunner(seed=0)
    plain = reference_greedy(target, list(prompt), 40)
    draft = CheckedDraft(PerturbedFakeRunner(seed=0, noise=2.0))  # agrees ~2/3 of the time
    engine = spec_engine(target, draft, draft_tokens=4)
    final = run(engine, GenerationRequest(prompt_ids=prompt, sampling=greedy(40)))
    assert list(final.token_ids) == plain
    stats = final.stats
    assert stats.drafted_tokens > 0 and 0 < stats.accepted_tokens < stats.drafted_tokens
    assert draft.num_checked > 3
    engine.blocks.check_invariants()


def test_identical_draft_is_always_accepted() -> None:
    target = FakeRunner(seed=0)
    draft = CheckedDraft(FakeRunner(seed=0), adaptive=AdaptiveDraftLength(3, enabled=False))
    engine = spec_engine(target, draft, draft_tokens=3)
    final = run(engine, GenerationRequest(prompt_ids=prompt_ids(9), sampling=greedy(24)))
    assert list(final.token_ids) == reference_greedy(target, list(prompt_ids(9)), 24)
    assert final.stats.accepted_tokens == final.stats.drafted_tokens > 0
    assert target.num_forward_calls <= 1 + 24 // 4 + 1  # prefill, then 4 tokens per forward


def test_concurrent_requests_keep_separate_draft_caches() -> None:
    target = CopyingFakeRunner(seed=0)
    draft = CheckedDraft(PerturbedFakeRunner(seed=0, noise=3.0), max_seqs=3)
    engine = spec_engine(target, draft, draft_tokens=3)
    prompts = [repetitive_prompt(30 + 5 * i, salt=i) for i in range(3)]
    requests = [GenerationRequest(prompt_ids=p, sampling=greedy(20)) for p in prompts]
    events = run_all(engine, requests)
    for request, prompt in zip(requests, prompts, strict=True):
        final = events[request.request_id][-1]
        assert list(final.token_ids) == reference_greedy(target, list(prompt), 20)
    draft.propose(Sequence([4, 5]), 1)  # the next proposal sweeps the finished mirrors
    assert len(draft._mirrors) == 1  # only the new one
    draft.close()
    assert draft.blocks.num_used_blocks == 0 and draft.runner.closed  # type: ignore[attr-defined]


def test_draft_stops_when_the_draft_context_is_full() -> None:
    draft = DraftModelProposer(FakeRunner(context_limit=32), block_size=4)
    seq = Sequence(list(prompt_ids(30)))
    assert draft.propose(seq, 4) == []  # 30 + 4 > 32: no drafting, no error
    assert draft.blocks.num_used_blocks == 0


def test_sampled_drafts_carry_their_distribution() -> None:
    runner = FakeRunner(seed=3)
    draft = DraftModelProposer(runner, block_size=4)
    params = SamplingParams(temperature=1.0, top_k=3, seed=9)
    seq = Sequence(list(prompt_ids(7)), params)
    drafts = draft.propose(seq, 3)
    q = draft.draft_probs(seq.seq_id)
    assert q is not None and q.shape == (len(drafts), runner.info.vocab_size)
    first = sampling_probs(runner.reference_logits(seq.token_ids), params)
    assert np.allclose(q[0], first) and q[0][drafts[0]] > 0
    assert draft.propose(Sequence(list(prompt_ids(7)), greedy(5)), 3)
    assert draft.draft_probs(seq.seq_id + 1) is None  # greedy drafts are point masses


def test_sampled_draft_engine_matches_target_distribution() -> None:
    """Through the engine: the first two sampled tokens follow the target's joint law."""
    target = FakeRunner(seed=0, dim=8)
    draft = DraftModelProposer(FakeRunner(seed=5, dim=8), block_size=4)
    engine = spec_engine(target, draft, draft_tokens=2)
    prompt = list(prompt_ids(5))
    params = SamplingParams(temperature=1.5, top_k=3, max_tokens=2, ignore_eos=True)
    first = sampling_probs(target.reference_logits(prompt), params)
    law: dict[tuple[int, int], float] = {}
    for x in np.flatnonzero(first):
        second = sampling_probs(target.reference_logits([*prompt, int(x)]), params)
        for y in np.flatnonzero(second):
            law[(int(x), int(y))] = first[x] * second[y]
    trials = 600
    counts: dict[tuple[int, int], int] = {}
    drafted = 0
    for seed in range(trials):
        sampling = SamplingParams(**{**params.__dict__, "seed": seed})
        final = run(engine, GenerationRequest(prompt_ids=tuple(prompt), sampling=sampling))
        pair = (final.token_ids[0], final.token_ids[1])
        assert pair in law, "a pair the target can never emit"
        counts[pair] = counts.get(pair, 0) + 1
        drafted += final.stats.drafted_tokens
    stat = sum((counts.get(c, 0) - p * trials) ** 2 / (p * trials) for c, p in law.items())
    # 8 degrees of freedom (9 cells): the 0.999 quantile of chi-square(8) is 26.1
    assert stat < 26.1, (stat, counts)
    assert drafted > 0


def test_tokenizer_mismatch_is_refused_naming_both_models() -> None:
    class Shifted(FakeTokenizer):
        def token_bytes(self, token_id: int) -> bytes:
            return b"?" if token_id == 100 else super().token_bytes(token_id)

    class Bigger(FakeTokenizer):
        vocab_size = FakeTokenizer.vocab_size + 1

    check_same_tokenizer(FakeTokenizer(), FakeTokenizer(), "target", "draft")
    with pytest.raises(EngineError, match=r"small\.gguf cannot draft for big\.gguf.*token 100"):
        check_same_tokenizer(FakeTokenizer(), Shifted(), "big.gguf", "small.gguf")
    with pytest.raises(EngineError, match="vocabulary of 261 tokens vs 260"):
        check_same_tokenizer(FakeTokenizer(), Bigger(), "big.gguf", "small.gguf")
    other = FakeRunner(seed=1)
    other.tokenizer = Shifted()
    options = EngineOptions(model="big.gguf")
    with pytest.raises(EngineError, match="small.gguf cannot draft for big.gguf"):
        _draft_proposer(other, options, FakeRunner(), "big.gguf", "small.gguf")
