from __future__ import annotations

import pytest

from ember.engine.block_manager import BlockManager
from ember.engine.errors import EngineError
from ember.engine.sequence import Sequence
from ember.engine.streaming import SinkWindow


def test_window_derived_from_ctx_and_bound() -> None:
    sw = SinkWindow.from_options(4, -1, 4096, 16)
    assert sw.sink_kept_tokens == 16 and sw.window == 4096 - 16 - 16
    assert sw.limit_tokens == 4096
    assert not SinkWindow.from_options(4, 0, 4096, 16).enabled
    with pytest.raises(EngineError, match="exceeds ctx"):
        SinkWindow.from_options(4, 5000, 4096, 16)
    with pytest.raises(EngineError, match="at least one block"):
        SinkWindow(4, 8, 16)


def test_blocks_to_drop() -> None:
    sw = SinkWindow(4, 32, 8)  # limit 8 + 32 + 8 = 48
    assert sw.blocks_to_drop(47, 1) == 0
    assert sw.blocks_to_drop(48, 1) == 1
    assert sw.blocks_to_drop(40, 17) == 2


def test_evict_drops_blocks_after_sinks_and_shifts_the_rest() -> None:
    sw = SinkWindow(4, 32, 8)
    bm = BlockManager(16, 8)
    seq = Sequence(list(range(48)))
    bm.allocate(seq, 48)
    seq.num_processed = 48
    bm.register_full_blocks(seq)
    table, hashes = list(seq.block_table), list(seq.block_hashes)
    assert len(hashes) == 6  # every full block is hashed before the eviction
    eviction = sw.evict(seq, 1, bm)
    assert eviction is not None and eviction.num_tokens == 8
    assert seq.block_table == table[:1] + table[2:6]  # the scheduler adds the next block
    assert seq.num_evicted == 8 and seq.num_kv_tokens == 40 and seq.num_sink_kept == 8
    assert eviction.shift is not None and eviction.shift.delta == -8
    assert eviction.shift.block_ids == table[2:6]
    assert seq.block_hashes == hashes[:1]  # only the sink block stays hashed
    assert seq.kv_token_ids() == list(range(8)) + list(range(16, 48))
    bm.check_invariants()


def test_step_larger_than_window_is_refused() -> None:
    sw = SinkWindow(4, 16, 8)
    with pytest.raises(EngineError):
        sw.evict(Sequence([1]), 17, BlockManager(4, 8))
