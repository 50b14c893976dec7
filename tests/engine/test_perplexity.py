from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from ember.engine.errors import EngineError
from ember.engine.perplexity import perplexity, target_log_probs
from ember.engine.runners.base import ForwardBatch
from ember.engine.runners.fake import FakeRunner
from ember.engine.sampling import log_softmax
from tests.engine.helpers import RecordingRunner, prompt_ids

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


class LogitsCountingRunner(RecordingRunner):
    """Counts the logits rows each forward asks for (every row costs a vocab-wide matmul)."""

    def __init__(self) -> None:
        super().__init__()
        self.num_logits_rows = 0

    def forward(self, batch: ForwardBatch) -> list[np.ndarray]:
        self.num_logits_rows += sum(step.num_logits for step in batch.steps)
        return super().forward(batch)


def test_streaming_cache_never_exceeds_sink_window_and_one_block() -> None:
    for chunk in (1, 8):
        runner = RecordingRunner()
        result = perplexity(
            runner, TOKENS, mode="streaming", ctx=64, sink=4, window=32, chunk=chunk, block_size=8
        )
        assert result.evicted_tokens >= len(TOKENS) - 48
        assert 40 < runner.max_cache_tokens <= 8 + 32 + 8  # sink rounded to a block


def test_streaming_chunk_of_one_block_is_exactly_token_at_a_time() -> None:
    runner = FakeRunner()
    result = perplexity(
        runner, TOKENS, mode="streaming", ctx=64, sink=4, window=32, chunk=8, block_size=8
    )
    assert result.tokens == len(TOKENS) - 1
    assert result.nll == pytest.approx(_reference_nll(runner, TOKENS, 8, 32, 8), rel=1e-6)


def test_recompute_asks_logits_only_for_scored_tokens() -> None:
    runner = LogitsCountingRunner()
    result = perplexity(runner, TOKENS, mode="recompute", ctx=64, window=40, stride=8, block_size=8)
    assert result.tokens == len(TOKENS) - 1
    # one row per scored token; the last token of each piece is only a target, never an input
    assert runner.num_logits_rows == result.tokens


def test_target_log_probs_match_log_softmax() -> None:
    logits = (np.random.default_rng(0).standard_normal((5, 1000)) * 8).astype(np.float32)
    targets = [0, 17, 999, 500, 3]
    expected = log_softmax(logits)[np.arange(5), targets]
    np.testing.assert_allclose(target_log_probs(logits, targets), expected, rtol=1e-6)


def test_recompute_opens_every_window_with_bos() -> None:
    runner = FakeRunner()
    tokens, window = TOKENS[:60], 40
    result = perplexity(
        runner, tokens, mode="recompute", ctx=64, window=window, stride=1, bos_id=1, block_size=8
    )
    body = tokens[1:]  # the text after its BOS: the tokens every mode scores
    manual = -sum(
        log_softmax(runner.reference_logits([1, *body[max(0, t + 1 - window) : t]]))[body[t]]
        for t in range(len(body))
    )
    assert result.tokens == len(body)
    assert result.nll == pytest.approx(float(manual), rel=1e-6)
    strided = perplexity(
        runner, TOKENS, mode="recompute", ctx=64, window=window, stride=7, bos_id=1, block_size=8
    )
    assert strided.tokens == len(TOKENS) - 1


def test_recompute_without_bos_keeps_the_paper_protocol() -> None:
    runner = FakeRunner()
    with_bos = perplexity(
        runner, TOKENS, mode="recompute", ctx=64, window=40, stride=8, bos_id=1, block_size=8
    )
    without = perplexity(
        runner,
        TOKENS,
        mode="recompute",
        ctx=64,
        window=40,
        stride=8,
        bos_id=1,
        recompute_bos=False,
        block_size=8,
    )
    plain = perplexity(runner, TOKENS, mode="recompute", ctx=64, window=40, stride=8, block_size=8)
    assert without.tokens == with_bos.tokens == len(TOKENS) - 1
    assert without.nll == pytest.approx(plain.nll, rel=1e-9)
    assert without.nll != pytest.approx(with_bos.nll, rel=1e-3)
    with pytest.raises(EngineError):  # BOS + window must fit in ctx
        perplexity(runner, TOKENS, mode="recompute", ctx=40, window=40, bos_id=1, block_size=8)


@pytest.mark.model
def test_streaming_through_llamacpp_reuses_a_sink_window_sized_cache(
    starter_gguf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("llama_cpp")
    from ember.engine.runners.llamacpp import runner as llamacpp

    monkeypatch.setattr(llamacpp, "KV_SLACK_TOKENS", 0)  # KV cells = the engine's blocks only
    runner = llamacpp.LlamaCppRunner.load(starter_gguf, threads=1, max_sequences=8)
    try:
        sentences = [
            f"Line {i} of the log says the pump ran for {i * 7 % 60} minutes." for i in range(80)
        ]
        # 384 tokens through the engine's 7 blocks (112 tokens) and llama.cpp's 256 cells (its
        # smallest context): 1.5x the cells, so without reuse decode fails (640 cost 1.7x this)
        ids = runner.tokenizer.encode(" ".join(sentences), add_bos=True)[:384]
        assert len(ids) == 384
        result = perplexity(runner, ids, mode="streaming", ctx=512, sink=4, window=64, chunk=16)
        # llama_decode would fail with "no free KV cells" if evicted cells were not reused
        assert runner.num_ctx_tokens < len(ids) - 1
        assert result.tokens == len(ids) - 1
        assert result.evicted_tokens >= len(ids) - 1 - (16 + 64 + 16)
        assert 1.0 < result.ppl < 50.0
    finally:
        runner.close()
