from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ember.engine.block_manager import BlockManager, block_hash, chain_hashes
from ember.engine.errors import EngineError
from ember.engine.sequence import Sequence

BS = 4


def _computed(bm: BlockManager, tokens: list[int]) -> Sequence:
    """A sequence whose whole prompt has been computed (KV written) and registered."""
    seq = Sequence(list(tokens))
    bm.allocate(seq, len(tokens))
    seq.num_processed = len(tokens)
    bm.register_full_blocks(seq)
    return seq


def test_hash_is_chained_and_stable() -> None:
    a = block_hash(None, [1, 2, 3, 4])
    assert a == block_hash(None, [1, 2, 3, 4])
    assert a != block_hash(None, [1, 2, 3, 5])
    assert block_hash(a, [5, 6, 7, 8]) != block_hash(block_hash(None, [0, 2, 3, 4]), [5, 6, 7, 8])
    assert a.hex() == block_hash(None, (1, 2, 3, 4)).hex()  # any int sequence, same bytes
    assert len(chain_hashes(list(range(11)), BS)) == 2


def test_allocate_append_free_counts() -> None:
    bm = BlockManager(8, BS)
    seq = Sequence(list(range(6)))
    assert bm.can_allocate(seq, 6)
    assert bm.allocate(seq, 6) == 0
    assert len(seq.block_table) == 2 and bm.num_free_blocks == 6
    seq.num_processed = 6
    assert bm.append(seq, 3) == []  # 9 tokens -> 3 blocks
    assert len(seq.block_table) == 3
    bm.free(seq)
    assert bm.num_free_blocks == 8 and seq.block_table == []
    bm.check_invariants()


def test_prefix_hit_shares_blocks_and_leaves_one_token() -> None:
    bm = BlockManager(16, BS)
    first = _computed(bm, list(range(10)))  # 2 full blocks hashed
    second = Sequence(list(range(8)) + [99, 98, 97])
    assert bm.allocate(second, 11) == 8
    assert second.block_table[:2] == first.block_table[:2]
    assert bm.ref_count(first.block_table[0]) == 2
    exact = Sequence(list(range(8)))  # fully cached prompt: one block is recomputed
    assert bm.match_prefix(exact.token_ids) == first.block_table[:1]
    bm.check_invariants()


def test_freed_blocks_stay_findable_until_reused_lru() -> None:
    bm = BlockManager(4, BS)
    seq = _computed(bm, list(range(8)))
    hashed = list(seq.block_table)
    bm.free(seq)
    assert bm.num_free_blocks == 4 and bm.num_cached_free_blocks == 2
    again = Sequence(list(range(8)) + [1])
    assert bm.match_prefix(again.token_ids) == hashed
    # Two fresh blocks come from the plain pool first; the third takes the least recently
    # freed cached one: the chain's tail (freed first), so its head stays useful.
    other = Sequence([50] * 12)
    bm.allocate(other, 12)
    assert bm.match_prefix(again.token_ids) == hashed[:1]
    bm.check_invariants()


def test_cached_block_budget() -> None:
    bm = BlockManager(8, BS, max_cached_blocks=1)
    seq = _computed(bm, list(range(12)))
    bm.free(seq)
    assert bm.num_cached_free_blocks == 1
    bm.check_invariants()


def test_copy_on_write_for_shared_partial_block() -> None:
    bm = BlockManager(8, BS)
    parent = Sequence(list(range(6)))
    bm.allocate(parent, 6)
    parent.num_processed = 6
    child = Sequence([])
    bm.fork(parent, child)
    assert bm.ref_count(parent.block_table[1]) == 2
    ops = bm.append(child, 1)
    assert len(ops) == 1 and ops[0].src_block == parent.block_table[1]
    assert ops[0].num_tokens == 2 and child.block_table[1] == ops[0].dst_block
    assert child.block_table[0] == parent.block_table[0]  # full block still shared
    assert bm.ref_count(parent.block_table[1]) == 1
    bm.check_invariants()


def test_exhaustion_is_an_error_not_a_truncation() -> None:
    bm = BlockManager(2, BS)
    seq = Sequence(list(range(12)))
    assert not bm.can_allocate(seq, 12)
    with pytest.raises(EngineError):
        bm.allocate(seq, 12)
    assert seq.block_table == [] and bm.num_free_blocks == 2


def test_make_private_copies_shared_and_unhashes_owned() -> None:
    bm = BlockManager(8, BS)
    a = _computed(bm, list(range(9)))
    b = Sequence(list(range(9)))
    assert bm.allocate(b, 9) == 8
    op = bm.make_private(b, 1)  # shared with a: copy on write
    assert op is not None and op.src_block == a.block_table[1] and op.num_tokens == BS
    assert b.block_table[1] == op.dst_block
    assert bm.make_private(a, 1) is None  # now a's alone: only its hash is forgotten
    assert bm.lookup_hash(a.block_hashes[1]) is None
    bm.check_invariants()


ops = st.lists(
    st.tuples(
        st.sampled_from(["new", "grow", "free", "fork"]), st.integers(0, 40), st.integers(0, 3)
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(ops)
def test_invariants_under_random_operations(program: list[tuple[str, int, int]]) -> None:
    """Ref counts equal table references; no block is both free and used; prefixes share."""
    bm = BlockManager(24, BS)
    live: list[Sequence] = []
    for op, amount, pick in program:
        if op == "new":
            tokens = [(pick + i // 7) % 3 for i in range(amount + 1)]  # many shared prefixes
            seq = Sequence(tokens)
            if bm.can_allocate(seq, len(tokens)):
                hits = bm.allocate(seq, len(tokens))
                assert hits % BS == 0 and hits < len(tokens)
                seq.num_processed = len(tokens)
                bm.register_full_blocks(seq)
                live.append(seq)
        elif op == "grow" and live:
            seq = live[pick % len(live)]
            extra = amount % 9 + 1
            if bm.can_append(seq, extra):
                bm.append(seq, extra)
                seq.token_ids += [7] * extra
                seq.num_processed += extra
                bm.register_full_blocks(seq)
        elif op == "free" and live:
            bm.free(live.pop(pick % len(live)))
        elif op == "fork" and live:
            child = Sequence([])
            bm.fork(live[pick % len(live)], child)
            live.append(child)
        bm.check_invariants()
        refs: dict[int, int] = {}
        for seq in live:
            assert len(seq.block_table) == bm.blocks_for(seq.num_kv_tokens)
            for block_id in seq.block_table:
                refs[block_id] = refs.get(block_id, 0) + 1
        for block_id in range(bm.num_blocks):
            assert bm.ref_count(block_id) == refs.get(block_id, 0)
        # a new sequence whose prompt was computed before never recomputes its full blocks
        if op == "new" and live and live[-1].token_ids == tokens and amount >= BS:
            again = Sequence(tokens)
            assert len(bm.match_prefix(again.token_ids)) == (len(tokens) - 1) // BS
