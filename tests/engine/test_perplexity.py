from __future__ import annotations

import math

import numpy as np
import pytest

from ember.engine.errors import EngineError
from ember.engine.fake_runner import FakeRunner
from ember.engine.perplexity import perplexity
from ember.engine.sampling import log_softmax
from tests.engine.helpers import prompt_ids

TOKENS = [1, *prompt_ids(150)]


def _reference_nll(
    runner: FakeRunner, tokens: list[int], sink: int, window: int, block: int
) -> float:
    """Token-at-a-time StreamingLLM by hand: cache = first sink tokens + a whole-block window."""
    limit = sink + window + block
    cache: list[int] = []
    nll = 0.0
    for i, token in enumerate(tokens[:-1]):
        if len(cache) + 1 > limit:
            del cache[sink : sink + block]
        cache.append(token)
        nll -= log_softmax(runner.reference_logits(cache))[tokens[i + 1]]
    return nll


def test_streaming_one_token_at_a_time_matches_reference() -> None:
    runner = FakeRunner()
    result = perplexity(runner, TOKENS, mode="streaming", ctx=64, sink=4, window=32, block_size=8)
    assert result.tokens == len(TOKENS) - 1 and result.evicted_tokens > 0
    assert result.nll == pytest.approx(_reference_nll(runner, TOKENS, 8, 32, 8), rel=1e-6)


def test_modes_agree_when_nothing_is_evicted() -> None:
    runner = FakeRunner()
    full = perplexity(runner, TOKENS, mode="windows", ctx=256, bos_id=1, block_size=8)
    streamed = perplexity(
        runner, TOKENS, mode="streaming", ctx=256, window=240, chunk=7, block_size=8
    )
    recompute = perplexity(
        runner, TOKENS, mode="recompute", ctx=256, window=len(TOKENS), block_size=8
    )
    assert full.tokens == streamed.tokens == recompute.tokens == len(TOKENS) - 1
    assert streamed.ppl == pytest.approx(full.ppl, rel=1e-5)
    assert recompute.ppl == pytest.approx(full.ppl, rel=1e-5)
    manual = -sum(
        log_softmax(runner.reference_logits(TOKENS[: i + 1]))[TOKENS[i + 1]]
        for i in range(len(TOKENS) - 1)
    )
    assert full.nll == pytest.approx(manual, rel=1e-6)
    assert math.isfinite(full.ppl)


def test_recompute_stride_scores_each_token_once() -> None:
    runner = FakeRunner()
    result = perplexity(runner, TOKENS, mode="recompute", ctx=64, window=40, stride=5, block_size=8)
    assert result.tokens == len(TOKENS) - 1
    exact = perplexity(
        runner, TOKENS[:60], mode="recompute", ctx=64, window=40, stride=1, block_size=8
    )
    manual = -sum(
        log_softmax(runner.reference_logits(TOKENS[max(0, i + 2 - 40) : i + 1]))[TOKENS[i + 1]]
        for i in range(59)
    )
    assert exact.nll == pytest.approx(float(np.float64(manual)), rel=1e-6)


def test_bad_modes() -> None:
    with pytest.raises(EngineError):
        perplexity(FakeRunner(), TOKENS, mode="streaming", ctx=64, window=0)
    with pytest.raises(EngineError):
        perplexity(FakeRunner(), TOKENS, mode="nope", ctx=64)
