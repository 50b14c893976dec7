"""LlamaCppRunner on the starter model, measured against raw llama-cpp-python."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ember.engine.api import ModelFiles
from ember.engine.runners.base import ForwardBatch, SeqStep
from ember.engine.runners.llamacpp.runner import LlamaCppRunner

pytestmark = pytest.mark.model

BS = 16
PROMPT = "The quick brown fox jumps over the lazy dog. Then the dog wakes up and"


@pytest.fixture(scope="module")
def runner(starter_files: ModelFiles) -> Iterator[LlamaCppRunner]:
    made = LlamaCppRunner.load(
        starter_files.path, digest=starter_files.digest, threads=1, max_sequences=8
    )
    made.init_kv(64, BS)
    yield made
    made.close()


@pytest.fixture(scope="module")
def raw(starter_gguf: Path) -> Iterator[Any]:
    import llama_cpp

    llm = llama_cpp.Llama(
        model_path=str(starter_gguf), n_ctx=1024, n_threads=1, logits_all=True, verbose=False
    )
    yield llm
    llm.close()


@pytest.fixture
def fresh(runner: LlamaCppRunner) -> LlamaCppRunner:
    """The shared runner with an empty cache (a new context)."""
    runner.init_kv(64, BS)
    return runner


def assert_same_distribution(a: np.ndarray, b: np.ndarray, max_tv: float = 0.05) -> None:
    """Rows of logits give the same next-token distribution up to llama.cpp's rounding.

    llama.cpp's sums depend on where cells sit in the cache and on the batch shape; on this model
    that moves single logits by up to ~2 but the softmax by a total variation under 0.02, while
    one wrong context token moves it by 0.1 to 1 (measured). So: total variation per row < 0.05.
    """
    pa = np.exp(a - a.max(-1, keepdims=True))
    pb = np.exp(b - b.max(-1, keepdims=True))
    tv = 0.5 * np.abs(pa / pa.sum(-1, keepdims=True) - pb / pb.sum(-1, keepdims=True)).sum(-1)
    assert tv.max() < max_tv, f"total variation per row: {tv.round(3)}"


def prefill(
    runner: LlamaCppRunner, seq_id: int, tokens: list[int], table: list[int], cached: int = 0
) -> np.ndarray:
    """Run tokens[cached:] for seq_id; logits of every new token."""
    new = tokens[cached:]
    step = SeqStep(seq_id, new, list(range(cached, len(tokens))), cached, table, len(new))
    return runner.forward(ForwardBatch([step]))[0]


def greedy(runner: LlamaCppRunner, seq_id: int, prompt: list[int], count: int) -> list[int]:
    """A minimal greedy loop over the runner (argmax of each step's last logits)."""
    table = list(range(seq_id * 8, seq_id * 8 + 8))
    logits = prefill(runner, seq_id, prompt, table)
    out = [int(logits[-1].argmax())]
    while len(out) < count:
        pos = len(prompt) + len(out) - 1
        step = SeqStep(seq_id, [out[-1]], [pos], pos, table, 1)
        out.append(int(runner.forward(ForwardBatch([step]))[0][-1].argmax()))
    return out


def test_info_describes_the_gguf(runner: LlamaCppRunner, starter_files: ModelFiles) -> None:
    info = runner.info
    assert info.model_digest == starter_files.digest  # the one digest app resolved
    assert (info.name, info.architecture, info.device) == ("llama.cpp", "gemma3", "cpu")
    assert info.vocab_size == 262144 and info.context_limit == 32768
    assert info.supports_shift
    assert info.kv_bytes_per_token > 0


def test_logits_equal_raw_llama(fresh: LlamaCppRunner, raw: Any) -> None:
    tokens = raw.tokenize(PROMPT.encode(), add_bos=True)
    raw.reset()
    raw.eval(tokens)
    expected = np.asarray(raw.scores[: len(tokens)])
    ours = prefill(fresh, 1, tokens, [0, 1])
    assert ours.shape == expected.shape
    np.testing.assert_allclose(ours, expected, atol=1e-3, rtol=0)


def test_greedy_equals_raw_llama_token_for_token(fresh: LlamaCppRunner, raw: Any) -> None:
    tokens = raw.tokenize(b"Write a short poem about the sea.", add_bos=True)
    raw.reset()
    expected = []
    for token in raw.generate(tokens, temp=0.0, top_k=1, reset=True):
        expected.append(token)
        if len(expected) == 24:
            break
    assert greedy(fresh, 1, tokens, 24) == expected


def test_sequences_in_one_batch_do_not_see_each_other(fresh: LlamaCppRunner, raw: Any) -> None:
    a = raw.tokenize(b"One, two, three,", add_bos=True)
    b = raw.tokenize(b"Paris is the capital of", add_bos=True)
    other = [b[0], *reversed(b[1:])]  # same length, other tokens: same kernels, other content
    results = []
    for partner in (b, other):
        fresh.init_kv(64, BS)
        steps = [
            SeqStep(1, a, list(range(len(a))), 0, [0], len(a)),
            SeqStep(2, partner, list(range(len(partner))), 0, [1], 1),
        ]
        results.append(fresh.forward(ForwardBatch(steps)))
    assert results[0][0].shape == (len(a), 262144) and results[0][1].shape == (1, 262144)
    np.testing.assert_array_equal(results[0][0], results[1][0])
    assert not np.array_equal(results[0][1], results[1][1])


def test_cached_prefix_shared_by_seq_cp_equals_own_cells(fresh: LlamaCppRunner, raw: Any) -> None:
    tokens = raw.tokenize((PROMPT * 3).encode(), add_bos=True)
    assert len(tokens) > 2 * BS + 4
    # Same calls (same llama.cpp kernels) twice: once sharing sequence 1's cells, once owning them.
    prefill(fresh, 1, tokens[: 2 * BS + 3], [0, 1, 2])
    fresh.release(1)
    shared = prefill(fresh, 2, tokens, [0, 1, 5, 6], cached=2 * BS)
    prefill(fresh, 3, tokens[: 2 * BS + 3], [10, 11, 12])
    own = prefill(fresh, 3, tokens, [10, 11, 15, 16], cached=2 * BS)
    assert fresh.block_map.num_recomputed == 0
    assert fresh.block_map.blocks[0].holders == {0, 1}  # one set of cells, two sequences
    assert_same_distribution(shared, own)


def test_shifted_keys_equal_keys_computed_at_the_new_positions(
    fresh: LlamaCppRunner, raw: Any
) -> None:
    tokens = raw.tokenize((PROMPT * 2).encode(), add_bos=True)[:20]
    high = [SeqStep(1, tokens, list(range(100, 120)), 0, [0, 1], 1)]
    fresh.forward(ForwardBatch(high))
    fresh.shift_positions(1, [0, 1], -100)  # RoPE K-shift of every kept key
    step = SeqStep(1, [tokens[3]], [20], 20, [0, 1], 1)
    shifted = fresh.forward(ForwardBatch([step]))[0][0]
    prefill(fresh, 2, tokens, [2, 3])
    step = SeqStep(2, [tokens[3]], [20], 20, [2, 3], 1)
    expected = fresh.forward(ForwardBatch([step]))[0][0]
    # Keys rotated after the fact (f16) versus rotated once. On this model merely moving a
    # sequence by 1-1000 positions (no shift at all) changes the softmax by a total variation of
    # 0.02-0.13 (measured), so that is the floor here; a wrong context gives 0.1-1.
    assert_same_distribution(shifted, expected, max_tv=0.2)


def test_sink_eviction_keeps_decoding_after_the_dropped_blocks(
    fresh: LlamaCppRunner, raw: Any
) -> None:
    tokens = raw.tokenize((PROMPT * 4).encode(), add_bos=True)[: 4 * BS]
    prefill(fresh, 1, tokens, [0, 1, 2, 3])
    fresh.shift_positions(1, [3], -2 * BS)  # blocks 1 and 2 dropped, block 3 re-based
    step = SeqStep(1, [tokens[5]], [2 * BS], 2 * BS, [0, 3, 4], 1)
    logits = fresh.forward(ForwardBatch([step]))[0][0]
    assert np.isfinite(logits).all()
    seq = fresh.block_map.live[1].llama_seq
    assert fresh.block_map.memory.pos_range(seq) == (0, 2 * BS)  # type: ignore[attr-defined]


def test_copy_block_then_diverge(fresh: LlamaCppRunner, raw: Any) -> None:
    tokens = raw.tokenize((PROMPT * 2).encode(), add_bos=True)[:20]  # one full block + 4
    prefill(fresh, 1, tokens, [0, 1])
    fresh.copy_block(1, 7, 4)  # fork: sequence 2 gets a private copy of the partial block
    forked = fresh.forward(ForwardBatch([SeqStep(2, [tokens[3]], [20], 20, [0, 7], 1)]))[0][0]
    original = fresh.forward(ForwardBatch([SeqStep(1, [tokens[3]], [20], 20, [0, 1], 1)]))[0][0]
    assert_same_distribution(forked, original)


def test_snapshot_round_trip_restores_the_prefix(fresh: LlamaCppRunner, raw: Any) -> None:
    tokens = raw.tokenize((PROMPT * 2).encode(), add_bos=True)[: 2 * BS + 1]
    prefill(fresh, 1, tokens[: 2 * BS], [0, 1])
    expected = prefill(fresh, 1, tokens, [0, 1, 2], cached=2 * BS)[-1]
    data = fresh.read_blocks([0, 1])
    fresh.init_kv(64, BS)  # a new context: nothing cached
    fresh.write_blocks([20, 21], data)
    restored = prefill(fresh, 2, tokens, [20, 21, 22], cached=2 * BS)[-1]
    assert fresh.block_map.num_recomputed == 0
    assert_same_distribution(restored, expected)


def test_a_corrupt_snapshot_is_refused(fresh: LlamaCppRunner, raw: Any) -> None:
    from ember.engine.errors import EngineError

    tokens = raw.tokenize(PROMPT.encode(), add_bos=True)[:BS]
    prefill(fresh, 1, tokens, [0])
    data = fresh.read_blocks([0])
    with pytest.raises(EngineError):
        fresh.write_blocks([5], data[:-100])
    with pytest.raises(EngineError):
        fresh.write_blocks([5, 6], data)


def test_borrowed_logits_are_the_copied_ones_read_only_until_the_next_call(
    fresh: LlamaCppRunner, raw: Any
) -> None:
    """ForwardBatch(borrow_logits=True): the same rows as a plain forward, lent from llama.cpp's
    buffer (read-only, overwritten by the next call); a plain forward's rows stay the caller's."""
    a = raw.tokenize(b"One, two, three,", add_bos=True)
    b = raw.tokenize(b"Paris is the capital of", add_bos=True)

    def steps(seq: int, tokens: list[int], table: list[int]) -> SeqStep:
        return SeqStep(seq, tokens, list(range(len(tokens))), 0, table, 2)

    copied = fresh.forward(ForwardBatch([steps(1, a, [0]), steps(2, b, [1])]))
    fresh.init_kv(64, BS)
    lent = fresh.forward(ForwardBatch([steps(1, a, [0]), steps(2, b, [1])], borrow_logits=True))
    assert [x.shape for x in lent] == [(2, 262144), (2, 262144)]
    for mine, borrowed in zip(copied, lent, strict=True):
        np.testing.assert_array_equal(mine, borrowed)
        assert mine.flags.writeable and not borrowed.flags.writeable
    kept = [x.copy() for x in lent]
    fresh.forward(ForwardBatch([SeqStep(1, [a[0]], [len(a)], len(a), [0], 1)]))
    assert not np.array_equal(lent[0][0], kept[0][0])  # lent: the next call wrote over it
    np.testing.assert_array_equal(copied[0], kept[0])  # copied: still the caller's
