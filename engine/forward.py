"""What one forward is made of: the KV pool's size in blocks, the KV work the scheduler planned
before a forward (block copies, position shifts), and each sequence's SeqStep. Shared by the
Engine's step loop and perplexity scoring (engine/perplexity.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ember.engine.errors import EngineError
from ember.engine.runners.base import SeqStep

if TYPE_CHECKING:
    from ember.engine.api import EngineOptions
    from ember.engine.runners.base import Runner
    from ember.engine.scheduler import SchedulerOutput
    from ember.engine.sequence import Sequence


def pool_blocks(options: EngineOptions, kv_bytes_per_token: int, limit_tokens: int) -> int:
    """KV pool size in blocks: from --kv-budget, else room for two full-context sequences."""
    per_seq = -(-limit_tokens // options.block_size) + 1
    if not options.kv_budget_bytes:
        return 2 * per_seq
    num_blocks = options.kv_budget_bytes // max(1, kv_bytes_per_token * options.block_size)
    if num_blocks < per_seq:
        need = per_seq * kv_bytes_per_token * options.block_size
        raise EngineError(
            f"kv budget of {options.kv_budget_bytes} bytes holds {num_blocks} blocks; one "
            f"sequence of {limit_tokens} tokens needs {per_seq} ({need} bytes): raise --kv-budget"
        )
    return num_blocks


def apply_kv_work(runner: Runner, out: SchedulerOutput) -> None:
    """The KV work the scheduler planned for a step, done before its forward: block copies
    (copy-on-write, eviction compaction) first, then position shifts of kept keys."""
    for copy in out.copies:
        runner.copy_block(copy.src_block, copy.dst_block, copy.num_tokens)
    for shift in out.shifts:
        runner.shift_positions(shift.seq_id, shift.block_ids, shift.delta)


def seq_step(seq: Sequence, token_ids: list[int], num_logits: int) -> SeqStep:
    """seq's share of a forward: token_ids continue its cache, logits for the last num_logits."""
    start = seq.num_kv_tokens  # cache index == RoPE position (re-based after eviction)
    return SeqStep(
        seq_id=seq.seq_id,
        token_ids=token_ids,
        positions=list(range(start, start + len(token_ids))),
        num_cached=start,
        block_table=list(seq.block_table),
        num_logits=num_logits,
    )
