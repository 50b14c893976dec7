"""Driving a Runner in tests: a trivial block allocator, prefill and step-by-step decode."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ember.engine.runners.base import ForwardBatch, Runner, SeqStep


@dataclass
class SimpleSeq:
    """One sequence with blocks taken from a shuffled free list (so tables are not contiguous)."""

    seq_id: int
    block_size: int
    free: list[int]
    block_table: list[int] = field(default_factory=list)
    num_cached: int = 0

    def step(self, token_ids: list[int], num_logits: int = 1) -> SeqStep:
        total = self.num_cached + len(token_ids)
        while len(self.block_table) * self.block_size < total:
            self.block_table.append(self.free.pop())
        st = SeqStep(
            seq_id=self.seq_id,
            token_ids=list(token_ids),
            positions=list(range(self.num_cached, total)),
            num_cached=self.num_cached,
            block_table=list(self.block_table),
            num_logits=num_logits,
        )
        self.num_cached = total
        return st


def scattered_blocks(num_blocks: int, seed: int = 0) -> list[int]:
    """All block ids in a random order (pop() takes from the end)."""
    return [int(b) for b in np.random.default_rng(seed).permutation(num_blocks)]


def prefill_logits(
    runner: Runner, ids: list[int], block_size: int = 16, num_blocks: int = 64
) -> np.ndarray:
    """Logits of every prompt position from one prefill through the paged cache."""
    runner.init_kv(num_blocks, block_size)
    seq = SimpleSeq(0, block_size, scattered_blocks(num_blocks))
    return runner.forward(ForwardBatch([seq.step(ids, num_logits=len(ids))]))[0]


def decode_logits(
    runner: Runner, ids: list[int], prefill: int, block_size: int = 16, num_blocks: int = 64
) -> np.ndarray:
    """Logits of positions prefill-1 .. len(ids)-1: prefill a prefix, then feed one token at a time."""
    runner.init_kv(num_blocks, block_size)
    seq = SimpleSeq(0, block_size, scattered_blocks(num_blocks))
    out = [runner.forward(ForwardBatch([seq.step(ids[:prefill])]))[0]]
    for tok in ids[prefill:]:
        out.append(runner.forward(ForwardBatch([seq.step([tok])]))[0])
    return np.concatenate(out)


def greedy(
    runner: Runner, prompt: list[int], num_new: int, block_size: int, num_blocks: int
) -> list[int]:
    """Greedy continuation of prompt through the paged cache."""
    runner.init_kv(num_blocks, block_size)
    seq = SimpleSeq(0, block_size, scattered_blocks(num_blocks))
    logits = runner.forward(ForwardBatch([seq.step(prompt)]))[0]
    out: list[int] = []
    for _ in range(num_new):
        out.append(int(logits[-1].argmax()))
        logits = runner.forward(ForwardBatch([seq.step([out[-1]])]))[0]
    return out


class _PinnedChoice:
    """A kernel choice that sends every prompt-sized batch one way (native, dense or bf16) and
    keeps the measured crossover between the native kernels' own tiled and one-row products
    (which agree bit for bit, so it only changes speed)."""

    def __init__(self, path: str, measured: Any) -> None:
        self.path, self.measured = path, measured

    def prefill_path(self, desc: Any, tokens: int) -> str:
        """The pinned path; bf16 only where the measured choice could take it (choice.bf16_holds:
        never F16, F32 or Q8_0 weights), the native kernels elsewhere."""
        from ember.engine.runners.torch.native.choice import bf16_holds

        return "native" if self.path == "bf16" and not bf16_holds(desc) else self.path

    def gemm_min_rows(self, descs: Any) -> int:
        return int(self.measured.gemm_min_rows(descs))


def prompt_paths(runner: Any) -> list[str]:
    """The numeric paths a prompt-sized batch can take on this machine (native/choice.py): the
    native kernels, float32 matmuls, and bfloat16 chunks where the CPU has bfloat16 hardware."""
    kernels = runner.kernels
    assert kernels is not None and kernels.choice is not None, "the native kernels are off"
    return ["native", "dense", *(["bf16"] if "bf16" in kernels.choice.paths else [])]


# Tiny random models (the families' and qwen3moe) have near ties that llama.cpp's rounding breaks
# one way and a prompt path the other (rows spanning ~52 logits, misses within 0.4 of llama.cpp's
# best). Top-1 on each prompt path alone, pinned, Xeon AVX-512: llama, qwen2, qwen3 0.938-1.0;
# phi3, gemma2, smollm3 1.0; mistral3 0.938-1.0 (Q4_0 on the bf16 path 0.938: 4 misses of 64,
# the largest 0.19 logits), top-5 >= 0.96; qwen3moe 0.969-1.0. Decoded a token at a time (33
# positions), with the k-quant blocks summed as exact integers (2026-12-06): qwen2 and qwen3moe
# Q6_K 0.939 (2 misses of 33; qwen3moe's at 0.146 and 0.168 logits, one of them missed before). A
# per-linear mix of paths spans more (mistral3 Q4_0 over all 243 mixes of its five shapes:
# 0.922-0.984), so each path is checked alone. The floor sits below the lowest pinned figure
# (0.938: 60 of 64); every miss must be a near tie (TINY_NEAR_TIE, largest measured 0.38:
# mistral3 Q6_K on the bf16 path), which a wrong layer breaks by several logits.
TINY_TOP1, TINY_NEAR_TIE = 0.93, 0.5


def worst_miss(got: np.ndarray, expected: np.ndarray) -> float:
    """How far below the reference's best its score of our top-1 falls, worst row (logits)."""
    return float((expected.max(-1) - expected[np.arange(len(got)), got.argmax(-1)]).max())


def agreement(got: np.ndarray, expected: np.ndarray) -> tuple[float, float]:
    """(top-1 agreement, mean top-5 overlap) of two logit matrices, row by row."""
    top1 = float((got.argmax(-1) == expected.argmax(-1)).mean())
    ours, theirs = np.argsort(-got, -1)[:, :5], np.argsort(-expected, -1)[:, :5]
    top5 = float(np.mean([len(set(a) & set(b)) / 5 for a, b in zip(ours, theirs, strict=True)]))
    return top1, top5


def scored_runs(
    label: str, runs: list[tuple[str, np.ndarray, np.ndarray]]
) -> list[tuple[str, float, float, float]]:
    """(phase, top-1, top-5 overlap, worst miss in logits) of each of agreement_runs' runs,
    each printed with the native ISA (the README's families table quotes these lines)."""
    from ember.engine.runners.torch.native.isa import choose

    out = []
    for phase, got, ref in runs:
        top1, top5 = agreement(got, ref)
        worst = worst_miss(got, ref)
        print(
            f"{label} {phase} vs llama.cpp, ISA {choose().name}: top-1 {top1:.3f} "
            f"top-5 {top5:.3f} worst miss {worst:.3f}"
        )
        out.append((phase, top1, top5, worst))
    return out


def agreement_runs(
    runner: Any, ids: list[int], expected: np.ndarray, num_blocks: int = 64
) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(phase, our logits, the reference's rows) for a check against llama.cpp's `expected`
    over ids: one prefill on each prompt path alone, pinned (a per-linear mix picked by timing
    moves a tiny model's near ties), then decode one token at a time after 32 prefilled."""
    runs = []
    for path in prompt_paths(runner):
        with prefill_path(runner, path):
            got = prefill_logits(runner, ids, num_blocks=num_blocks)
        runs.append((f"prefill ({path})", got, expected))
    decoded = decode_logits(runner, ids, prefill=32, num_blocks=num_blocks)
    return [*runs, ("decode", decoded, expected[31:])]


@contextmanager
def prefill_path(runner: Any, path: str) -> Iterator[None]:
    """Run prompt-sized batches on one numeric path, "native" (the GGUF blocks), "dense"
    (float32 matmuls over dequantized weights) or "bf16" (bfloat16 chunks), instead of the per-linear mix a timing
    measurement picks on this machine (native/choice.py): fidelity checks each path alike."""
    assert path in ("native", "dense", "bf16"), path
    kernels = runner.kernels
    assert kernels is not None and kernels.choice is not None, "the native kernels are off"
    measured = kernels.choice
    kernels.choice = _PinnedChoice(path, measured)
    try:
        yield
    finally:
        kernels.choice = measured
