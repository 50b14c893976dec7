"""SinkWindow: StreamingLLM attention-sink eviction (which blocks leave, how positions shift).

A sequence keeps its first `sink` tokens (rounded up to whole blocks: `sink_kept_tokens`) and its
most recent `window` tokens; whole blocks in between are dropped. Positions are re-based so the
kept cache is a contiguous RoPE range: cache index == position, and the runner re-rotates the
keys of the kept blocks after the dropped range by -dropped_tokens (llama.cpp's K-shift).

Bound: a sequence's cache never holds more than sink_kept_tokens + window + block_size tokens
(`limit_tokens`). Eviction drops the fewest whole blocks that keep the next step under it, so
the most recent `window` tokens (including the step's new ones) always stay. No torch here.
"""

from __future__ import annotations

from dataclasses import dataclass

from ember.engine.block_manager import BlockManager, CopyOp
from ember.engine.errors import EngineError
from ember.engine.sequence import Sequence


@dataclass(frozen=True)
class ShiftOp:
    """The runner must re-base the keys in block_ids by delta positions (delta < 0)."""

    seq_id: int
    block_ids: list[int]
    delta: int


@dataclass(frozen=True)
class Eviction:
    """What one eviction did: the copies and the shift the runner must apply, in that order."""

    num_tokens: int
    copies: list[CopyOp]
    shift: ShiftOp | None


@dataclass(frozen=True)
class SinkWindow:
    """Keep `sink` first tokens and the last `window` tokens; window 0 turns eviction off."""

    sink: int
    window: int
    block_size: int = 16

    def __post_init__(self) -> None:
        if self.sink < 0 or self.window < 0:
            raise EngineError(f"sink={self.sink}, window={self.window}: must be >= 0")
        if self.window and self.window < self.block_size:
            raise EngineError(
                f"window={self.window}: must be 0 (off) or at least one block ({self.block_size})"
            )

    @classmethod
    def from_options(cls, sink: int, window: int, ctx: int, block_size: int) -> SinkWindow:
        """Resolve window -1 (derived: fill ctx) and check the bound fits in ctx tokens."""
        sink_kept = -(-sink // block_size) * block_size
        if window == -1:
            window = ctx - sink_kept - block_size
            if window < block_size:
                raise EngineError(f"ctx={ctx} is too small for sink={sink} and a window")
        made = cls(sink, window, block_size)
        if made.enabled and made.limit_tokens > ctx:
            raise EngineError(
                f"sink={sink} + window={window} + one block ({block_size}) exceeds ctx={ctx}"
            )
        return made

    @property
    def enabled(self) -> bool:
        return self.window > 0

    @property
    def sink_blocks(self) -> int:
        return -(-self.sink // self.block_size)

    @property
    def sink_kept_tokens(self) -> int:
        return self.sink_blocks * self.block_size

    @property
    def limit_tokens(self) -> int:
        """The most tokens a sequence's cache ever holds."""
        return self.sink_kept_tokens + self.window + self.block_size

    @property
    def max_step_tokens(self) -> int:
        """New tokens one step may add (a longer prompt prefills in chunks of at most this)."""
        return self.window

    def blocks_to_drop(self, num_kv_tokens: int, num_new_tokens: int) -> int:
        """How many whole blocks must go before num_new_tokens more can enter the cache."""
        if not self.enabled:
            return 0
        excess = num_kv_tokens + num_new_tokens - self.limit_tokens
        return max(0, -(-excess // self.block_size))

    def evict(self, seq: Sequence, num_new_tokens: int, blocks: BlockManager) -> Eviction | None:
        """Drop blocks after the sinks so num_new_tokens fit; return the runner's work."""
        if num_new_tokens > self.max_step_tokens:
            raise EngineError(f"step of {num_new_tokens} tokens exceeds window={self.window}")
        num_blocks = self.blocks_to_drop(seq.num_kv_tokens, num_new_tokens)
        if not num_blocks:
            return None
        start = self.sink_blocks
        # Whole full blocks only: the bound on num_new_tokens guarantees enough of them.
        assert start + num_blocks <= seq.num_kv_tokens // self.block_size
        blocks.drop_blocks(seq, start, num_blocks)
        num_tokens = num_blocks * self.block_size
        seq.num_evicted += num_tokens
        seq.num_sink_kept = self.sink_kept_tokens
        copies: list[CopyOp] = []
        for index in range(start, len(seq.block_table)):
            if index * self.block_size >= seq.num_kv_tokens:
                break  # blocks reserved for this step's new tokens hold nothing yet
            op = blocks.make_private(seq, index)
            if op is not None:
                copies.append(op)
        kept = seq.block_table[start : blocks.blocks_for(seq.num_kv_tokens)]
        shift = ShiftOp(seq.seq_id, list(kept), -num_tokens) if kept else None
        return Eviction(num_tokens, copies, shift)
