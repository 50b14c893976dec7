"""KV store bookkeeping: slots, block copies, snapshots."""

from __future__ import annotations

import pytest
import torch

from ember.engine.errors import EngineError
from ember.engine.runners.torch.kv_store import KVStore


def _store() -> KVStore:
    return KVStore(
        n_layers=2,
        num_blocks=4,
        block_size=4,
        n_kv_heads=2,
        head_dim=8,
        dtype=torch.float32,
        device=torch.device("cpu"),
    )


def test_write_then_gather_follows_the_block_table() -> None:
    kv = _store()
    k, v = torch.randn(6, 2, 8), torch.randn(6, 2, 8)
    slots = torch.tensor([12, 13, 14, 15, 4, 5])  # block 3 then block 1
    kv.write(1, slots, k, v)
    gk, gv = kv.gather(1, torch.tensor([3, 1]), 6)
    assert torch.equal(gk, k) and torch.equal(gv, v)


def test_copy_block_copies_every_layer_prefix() -> None:
    kv = _store()
    for layer in range(2):
        kv.write(layer, torch.arange(0, 4), torch.randn(4, 2, 8), torch.randn(4, 2, 8))
    kv.copy_block(0, 2, 3)
    for pool in (*kv.k, *kv.v):
        assert torch.equal(pool[2, :3], pool[0, :3]) and not pool[2, 3].any()


def test_snapshot_round_trip_and_size_check() -> None:
    kv = _store()
    kv.write(0, torch.arange(4, 12), torch.randn(8, 2, 8), torch.randn(8, 2, 8))
    data = kv.read_blocks([1, 2])
    other = _store()
    other.write_blocks([3, 0], data)
    assert other.read_blocks([3, 0]) == data
    with pytest.raises(EngineError, match="snapshot"):
        other.write_blocks([3], data)


def _int8_store() -> KVStore:
    return KVStore(2, 4, 4, 2, 16, torch.int8, torch.device("cpu"))


def test_int8_store_keeps_each_head_within_half_a_step() -> None:
    kv = _int8_store()
    k, v = torch.randn(6, 2, 16) * 3, torch.randn(6, 2, 16)
    slots = torch.tensor([12, 13, 14, 15, 4, 5])
    kv.write(0, slots, k, v)
    gk, gv = kv.gather(0, torch.tensor([3, 1]), 6)
    for got, want in ((gk, k), (gv, v)):
        step = want.abs().amax(-1, keepdim=True) / 127  # one code per head and token
        assert ((got - want).abs() <= step / 2 + 1e-6).all()
    assert kv.bytes_per_block == 2 * 2 * (4 * 2 * 16 + 4 * 2 * 4)  # codes + float32 scales


def test_int8_snapshot_round_trip_carries_the_scales() -> None:
    kv = _int8_store()
    kv.write(1, torch.arange(4, 12), torch.randn(8, 2, 16), torch.randn(8, 2, 16))
    data = kv.read_blocks([1, 2])
    other = _int8_store()
    other.write_blocks([0, 3], data)
    ka, va = kv.gather(1, torch.tensor([1, 2]), 8)
    kb, vb = other.gather(1, torch.tensor([0, 3]), 8)
    assert torch.equal(ka, kb) and torch.equal(va, vb)


def test_int8_keys_rewritten_after_a_rotation_stay_close() -> None:
    kv = _int8_store()
    k = torch.randn(4, 2, 16)
    kv.write(0, torch.arange(8, 12), k, k)
    blocks = torch.tensor([2])
    keys = kv.read_keys(0, blocks)
    kv.write_keys(0, blocks, -keys)  # any float rewrite is re-quantized per head
    assert torch.allclose(kv.read_keys(0, blocks), -keys, atol=1e-6)
