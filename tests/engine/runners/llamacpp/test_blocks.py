"""BlockMap: engine block tables mapped onto (a model of) llama.cpp sequence memory."""

from __future__ import annotations

import pytest

from ember.engine.errors import EngineError
from ember.engine.runners.base import SeqStep
from ember.engine.runners.llamacpp.blocks import BlockMap, PlannedStep
from tests.engine.runners.llamacpp.fake_llama_memory import FakeLlamaMemory

BS = 4  # block size: small so a few tokens span several blocks


def make(num_seqs: int = 8) -> tuple[BlockMap, FakeLlamaMemory]:
    memory = FakeLlamaMemory()
    return BlockMap(memory, BS, num_seqs), memory


def run(bm: BlockMap, mem: FakeLlamaMemory, step: SeqStep) -> PlannedStep:
    planned = bm.plan(step)
    mem.decode(planned.llama_seq, planned.token_ids, planned.positions)
    return planned


def prefill(seq_id: int, tokens: list[int], table: list[int], cached: int = 0) -> SeqStep:
    new = tokens[cached:]
    return SeqStep(seq_id, new, list(range(cached, len(tokens))), cached, table, 1)


def test_prefill_then_decode_keeps_one_sequence_in_order() -> None:
    bm, mem = make()
    tokens = [10, 11, 12, 13, 14, 15]
    p = run(bm, mem, prefill(1, tokens, [0, 1]))
    run(bm, mem, SeqStep(1, [16], [6], 6, [0, 1], 1))
    run(bm, mem, SeqStep(1, [17], [7], 7, [0, 1], 1))
    assert mem.view(p.llama_seq) == list(enumerate([*tokens, 16, 17]))
    assert bm.blocks[1].token_ids == [14, 15, 16, 17]


def test_cached_prefix_is_shared_by_seq_cp_without_decoding_again() -> None:
    bm, mem = make()
    prompt = list(range(100, 110))  # 2 full blocks + 2 tokens
    first = run(bm, mem, prefill(1, prompt, [0, 1, 2]))
    bm.release(1)
    # The engine found blocks 0 and 1 by hash: 8 tokens cached, the rest goes to new block 5.
    second = run(bm, mem, prefill(2, [*prompt[:8], 7, 8, 9], [0, 1, 5], cached=8))
    assert second.num_recomputed == 0
    assert second.token_ids == [7, 8, 9]
    assert mem.view(second.llama_seq) == list(enumerate([*prompt[:8], 7, 8, 9]))
    assert first.llama_seq != second.llama_seq
    # The cells of the prefix are the same cells (shared), not copies.
    shared = [c for c in mem.cells if second.llama_seq in c.seqs and c.pos < 8]
    assert all(first.llama_seq in c.seqs for c in shared)


def test_rolled_back_drafts_are_removed_before_the_next_step() -> None:
    bm, mem = make()
    run(bm, mem, prefill(1, [1, 2, 3, 4, 5], [0, 1]))
    # 1 + 3 drafted tokens scored; the engine accepts one and rolls back to 7 cached tokens.
    p = run(bm, mem, SeqStep(1, [6, 7, 8, 9], [5, 6, 7, 8], 5, [0, 1, 2], 4))
    p = run(bm, mem, SeqStep(1, [70], [7], 7, [0, 1], 1))
    assert mem.view(p.llama_seq) == list(enumerate([1, 2, 3, 4, 5, 6, 7, 70]))
    assert 2 not in bm.live[1].blocks


def test_sink_eviction_shift_gives_contiguous_positions() -> None:
    bm, mem = make()
    tokens = list(range(50, 66))  # 4 blocks: 0 (sink), 1, 2 (dropped), 3 (kept)
    p = run(bm, mem, prefill(1, tokens, [0, 1, 2, 3]))
    # The engine drops blocks 1 and 2 and shifts block 3 back by 8 positions.
    bm.shift(1, [3], -8)
    run(bm, mem, SeqStep(1, [99], [8], 8, [0, 3, 4], 1))
    assert mem.view(p.llama_seq) == list(enumerate([*tokens[:4], *tokens[12:], 99]))
    # The dropped blocks stay cached in a keeper sequence at their old positions.
    keeper = next(iter(bm.blocks[1].holders))
    assert keeper != p.llama_seq
    assert mem.view(keeper) == list(zip(range(4, 12), tokens[4:12], strict=True))


def test_copy_block_is_a_physical_copy() -> None:
    bm, mem = make()
    first = run(bm, mem, prefill(1, [1, 2, 3, 4, 5, 6], [0, 1]))
    src_cells = {id(c) for c in mem.cells}
    bm.copy(1, 7, 2)  # copy-on-write of the partial block 1 into block 7 (a forked sequence)
    p = run(bm, mem, SeqStep(2, [60], [6], 6, [0, 7], 1))
    run(bm, mem, SeqStep(1, [70], [6], 6, [0, 1], 1))
    assert mem.view(p.llama_seq) == list(enumerate([1, 2, 3, 4, 5, 6, 60]))
    assert mem.view(first.llama_seq) == list(enumerate([1, 2, 3, 4, 5, 6, 70]))
    copied = [c for c in mem.cells if p.llama_seq in c.seqs and c.pos in (4, 5)]
    assert copied and all(id(c) not in src_cells for c in copied)
    assert bm.blocks[1].token_ids == [5, 6, 70] and bm.blocks[7].token_ids == [5, 6, 60]


def test_released_blocks_survive_until_the_engine_reuses_their_ids() -> None:
    bm, mem = make()
    first = run(bm, mem, prefill(1, [1, 2, 3, 4, 5, 6, 7, 8], [0, 1]))
    bm.release(1)
    assert mem.view(first.llama_seq) == list(enumerate([1, 2, 3, 4, 5, 6, 7, 8]))
    # Block 0 is reused for an unrelated sequence: its old cells go, block 1 stays cached.
    run(bm, mem, prefill(2, [9, 9, 9], [0]))
    assert mem.view(first.llama_seq) == list(zip(range(4, 8), [5, 6, 7, 8], strict=True))
    bm.release(2)
    run(bm, mem, prefill(3, [42], [1]))  # block 1 reused too: the keeper frees its slot
    assert first.llama_seq not in bm.holders or bm.holders[first.llama_seq].blocks


def test_lost_blocks_are_decoded_again_from_their_tokens() -> None:
    bm, mem = make(num_seqs=3)  # 2 usable slots: a keeper must be evicted to admit a sequence
    run(bm, mem, prefill(1, [1, 2, 3, 4, 5, 6, 7, 8], [0, 1]))
    bm.release(1)  # seq slot 0 keeps blocks 0 and 1
    run(bm, mem, prefill(2, [1, 2, 3, 4, 9], [0, 2], cached=4))  # shares block 0
    bm.release(2)  # slot 1 keeps block 2 only (block 0 is slot 0's)
    run(bm, mem, prefill(3, [7], [3]))  # evicts the least recently used keeper (slot 0)
    bm.release(3)
    p = run(bm, mem, prefill(4, [1, 2, 3, 4, 5, 6, 7, 8, 0], [0, 1, 4], cached=8))
    assert p.num_recomputed > 0
    assert mem.view(p.llama_seq) == list(enumerate([1, 2, 3, 4, 5, 6, 7, 8, 0]))


def test_snapshot_blocks_round_trip_through_state_bytes() -> None:
    bm, mem = make()
    run(bm, mem, prefill(1, list(range(20, 30)), [0, 1, 2]))
    exported = [bm.export_block(b) for b in (0, 1, 2)]
    fresh, fresh_mem = make()
    for block_id, (loc, state) in zip((10, 11, 12), exported, strict=True):
        fresh.import_block(block_id, loc.pos_start, loc.token_ids, state)
    p = run(fresh, fresh_mem, SeqStep(5, [1], [10], 10, [10, 11, 12], 1))
    assert p.num_recomputed == 0
    assert fresh_mem.view(p.llama_seq) == list(enumerate([*range(20, 30), 1]))


def test_a_suffix_of_a_snapshot_restores_next_to_cached_blocks() -> None:
    bm, mem = make()
    run(bm, mem, prefill(1, list(range(40, 52)), [0, 1, 2]))
    fresh, fresh_mem = make()
    run(fresh, fresh_mem, prefill(1, list(range(40, 44)), [5]))  # block 0's tokens, in RAM
    fresh.release(1)
    for block_id, source in ((6, 1), (7, 2)):
        loc, state = bm.export_block(source)
        fresh.import_block(block_id, loc.pos_start, loc.token_ids, state)
    p = run(fresh, fresh_mem, SeqStep(2, [9], [12], 12, [5, 6, 7, 8], 1))
    assert fresh_mem.view(p.llama_seq) == list(enumerate([*range(40, 52), 9]))


def test_a_step_that_does_not_follow_the_cache_is_refused() -> None:
    bm, mem = make()
    run(bm, mem, prefill(1, [1, 2, 3], [0]))
    with pytest.raises(EngineError, match="does not follow"):
        bm.plan(SeqStep(1, [4], [7], 3, [0], 1))
    with pytest.raises(EngineError, match="expects 4"):
        bm.plan(SeqStep(2, [4], [4], 4, [0, 1], 1))


def test_slots_run_out_only_when_every_slot_is_live() -> None:
    bm, mem = make(num_seqs=3)
    run(bm, mem, prefill(1, [1], [0]))
    run(bm, mem, prefill(2, [2], [1]))
    with pytest.raises(EngineError, match="no free sequence slot"):
        bm.plan(prefill(3, [3], [2]))
