"""Perplexity of a token stream through the engine's own paged cache (`ember eval ppl`).

Three ways to score, all through the same BlockManager / SinkWindow / runner path as generation:
  windows   : independent windows of ctx tokens, each starting with BOS (llama.cpp's protocol)
  streaming : one pass over the whole text with sink-window eviction (StreamingLLM's protocol);
              chunk=1 feeds one token at a time as the paper does, larger chunks are faster
  recompute : sliding window with re-computation (the paper's baseline): every `stride` tokens
              BOS + the last `window` tokens are recomputed from scratch; stride=1 is exact
PPL = exp(-mean log p(token_i | context)) over every scored token (the first token has no context).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ember.engine.block_manager import BlockManager
from ember.engine.errors import EngineError
from ember.engine.forward import apply_kv_work, seq_step
from ember.engine.runners.base import ForwardBatch, Runner
from ember.engine.scheduler import Scheduler, SchedulerConfig, SchedulerOutput
from ember.engine.sequence import Sequence
from ember.engine.streaming import SinkWindow

MAX_SCORE_CHUNK = 64  # logits rows per forward: (64, vocab) float32 stays small for big vocabs
MAX_STEP_TOKENS = 512  # tokens per forward when most rows need no logits (recompute context)


@dataclass
class PerplexityResult:
    """Total negative log-likelihood over the scored tokens."""

    nll: float = 0.0
    tokens: int = 0
    evicted_tokens: int = 0

    @property
    def ppl(self) -> float:
        return math.exp(self.nll / self.tokens) if self.tokens else float("nan")

    def add(self, logits: np.ndarray, targets: list[int]) -> None:
        """Add -log p(target) of each row (row i scores targets[i])."""
        self.nll -= float(target_log_probs(logits[: len(targets)], targets).sum())
        self.tokens += len(targets)


def target_log_probs(logits: np.ndarray, targets: list[int]) -> np.ndarray:
    """log softmax(logits)[i, targets[i]] per row, without a full (n, vocab) float64 copy."""
    rows = np.asarray(logits, dtype=np.float32)  # (n, vocab)
    peak = rows.max(axis=-1, keepdims=True)  # (n, 1)
    shifted = rows - peak
    np.exp(shifted, out=shifted)  # each term in (0, 1]: float32 is exact enough, summed in float64
    log_sum = peak[:, 0].astype(np.float64) + np.log(shifted.sum(axis=-1, dtype=np.float64))
    return rows[np.arange(len(targets)), targets].astype(np.float64) - log_sum


class Scorer:
    """Runs one sequence at a time through a runner to score next-token log-likelihoods, with
    the engine's own planning: the Scheduler makes room (eviction, blocks) and the engine's
    apply_kv_work / seq_step turn that into the runner's KV work and forward steps."""

    def __init__(self, runner: Runner, blocks: BlockManager, block_size: int) -> None:
        self.runner = runner
        self.blocks = blocks
        self.block_size = block_size

    def score(
        self,
        token_ids: list[int],
        result: PerplexityResult,
        *,
        sink_window: SinkWindow | None = None,
        chunk: int = MAX_SCORE_CHUNK,
        score_from: int = 0,
    ) -> None:
        """Feed token_ids in chunks; add log p(token_ids[i+1] | ...) for i + 1 >= score_from."""
        # The last token is only ever a target, so it is never fed; row i predicts token i + 1.
        seq = Sequence(list(token_ids[:-1]))
        chunk = max(1, min(chunk, MAX_SCORE_CHUNK))
        max_step = MAX_STEP_TOKENS
        if sink_window is not None and sink_window.enabled:
            chunk = min(chunk, sink_window.max_step_tokens)
            max_step = chunk  # eviction makes room for one step at a time
        planner = Scheduler(SchedulerConfig(max_batch_seqs=1), self.blocks, sink_window)
        self.blocks.allocate(seq, 0)
        try:
            while seq.num_pending > 0:
                first = seq.num_processed + 1  # index of the token the step's first row predicts
                skip = max(0, score_from - first)  # leading rows whose targets are not scored
                count = min(seq.num_pending, max_step, skip + chunk)
                skip = min(skip, count - 1)  # a step asks for at least one logits row
                work = SchedulerOutput()
                planner.grow(seq, count, work)
                apply_kv_work(self.runner, work)
                tokens = seq.token_ids[seq.num_processed : seq.num_processed + count]
                # only the rows that are scored: logits (count - skip, vocab)
                step = seq_step(seq, tokens, count - skip)
                (logits,) = self.runner.forward(ForwardBatch([step]))
                if first + skip >= score_from:
                    result.add(logits, token_ids[first + skip : first + count])
                seq.num_processed += count
        finally:
            result.evicted_tokens += seq.num_evicted
            self.blocks.free(seq)
            self.runner.release(seq.seq_id)


def perplexity(
    runner: Runner,
    token_ids: list[int],
    *,
    mode: str,
    ctx: int,
    sink: int = 4,
    window: int = 0,
    chunk: int = 1,
    stride: int = 1,
    bos_id: int | None = None,
    recompute_bos: bool = True,
    block_size: int = 16,
) -> PerplexityResult:
    """Score token_ids (BOS already added where the model wants it) in one of the three modes."""
    if len(token_ids) < 2:
        raise EngineError("perplexity needs at least two tokens")
    limit = ctx if mode != "streaming" else SinkWindow(sink, window, block_size).limit_tokens
    num_blocks = -(-limit // block_size) + 2
    runner.init_kv(num_blocks, block_size)
    scorer = Scorer(
        runner, BlockManager(num_blocks, block_size, enable_prefix_cache=False), block_size
    )
    result = PerplexityResult()
    if mode == "windows":
        _windows(scorer, token_ids, result, ctx, bos_id)
    elif mode == "streaming":
        if window <= 0:
            raise EngineError("streaming perplexity needs --window W > 0")
        scorer.score(
            token_ids, result, sink_window=SinkWindow(sink, window, block_size), chunk=chunk
        )
    elif mode == "recompute":
        _recompute(
            scorer, token_ids, result, ctx, window, stride, bos_id if recompute_bos else None
        )
    else:
        raise EngineError(f"perplexity mode {mode!r}: choose windows, streaming or recompute")
    return result


def _split_bos(token_ids: list[int], bos_id: int | None) -> tuple[list[int], list[int]]:
    """(head, body): head is [BOS] when the model wants one; body the text after the text's BOS."""
    if bos_id is None:
        return [], token_ids
    return [bos_id], token_ids[1:] if token_ids[0] == bos_id else token_ids


def _windows(
    scorer: Scorer, token_ids: list[int], result: PerplexityResult, ctx: int, bos_id: int | None
) -> None:
    head, body = _split_bos(token_ids, bos_id)
    step = ctx - len(head)
    for start in range(0, len(body), step):
        scorer.score(head + body[start : start + step], result)


def _recompute(
    scorer: Scorer,
    token_ids: list[int],
    result: PerplexityResult,
    ctx: int,
    window: int,
    stride: int,
    bos_id: int | None,
) -> None:
    """Every stride tokens, recompute [BOS] + the last `window` tokens; score the last stride."""
    # Like the windows mode, each fresh context opens with the model's BOS: a model trained to
    # sink attention into BOS (Gemma) is otherwise scored on inputs it never saw in training.
    # bos_id=None gives the paper's literal protocol (the window's first token is whatever it is).
    head, body = _split_bos(token_ids, bos_id)
    if not 0 < window <= ctx - len(head):
        raise EngineError(f"recompute perplexity needs 0 < --window <= --ctx - {len(head)} (BOS)")
    stride = max(1, min(stride, window - 1))
    scorer.score(head + body[:window], result)  # the first window scores every token
    for end in range(window, len(body), stride):
        stop = min(end + stride, len(body))
        # piece index len(head) + i holds body[stop - window + i]; score body[end:stop]
        scorer.score(
            head + body[stop - window : stop], result, score_from=len(head) + window - (stop - end)
        )
