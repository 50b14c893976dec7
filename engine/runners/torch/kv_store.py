"""Paged KV memory: per layer, K and V pools shaped (num_blocks, block_size, n_kv_heads, head_dim).

Block ids come from the engine's BlockManager; slot s of the flattened pool is token
s % block_size of block s // block_size.
"""

from __future__ import annotations

import torch

from ember.engine.errors import EngineError


class KVStore:
    """K/V pools for every layer, addressed by (block, offset) slots."""

    def __init__(
        self,
        n_layers: int,
        num_blocks: int,
        block_size: int,
        n_kv_heads: int,
        head_dim: int,
        dtype: torch.dtype,
        device: torch.device,
    ) -> None:
        if num_blocks < 1 or block_size < 1:
            raise EngineError(
                f"KV store: need >= 1 block of >= 1 token, got {num_blocks}x{block_size}"
            )
        shape = (num_blocks, block_size, n_kv_heads, head_dim)
        self.k = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(n_layers)]
        self.v = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(n_layers)]
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.dtype = dtype
        self.quantized = False  # int8 pools with per-head scales (k_scale / v_scale)
        self.k_scale: list[torch.Tensor] = []
        self.v_scale: list[torch.Tensor] = []

    @property
    def bytes_per_block(self) -> int:
        """K and V bytes of one block over all layers."""
        return 2 * sum(t[0].numel() * t.element_size() for t in self.k)

    def write(self, layer: int, slots: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """Store k, v (T, n_kv_heads, head_dim) at int64 slots (T,)."""
        self.k[layer].view(-1, *k.shape[1:]).index_copy_(0, slots, k.to(self.dtype))
        self.v[layer].view(-1, *v.shape[1:]).index_copy_(0, slots, v.to(self.dtype))

    def gather(
        self, layer: int, blocks: torch.Tensor, num_keys: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """K, V of the first num_keys slots of `blocks` in order: (num_keys, n_kv_heads, head_dim)."""
        k = self.k[layer].index_select(0, blocks).flatten(0, 1)[:num_keys]
        v = self.v[layer].index_select(0, blocks).flatten(0, 1)[:num_keys]
        return k, v

    def copy_block(self, src: int, dst: int, num_tokens: int) -> None:
        """Copy the first num_tokens slots of block src into block dst, every layer."""
        for pool in (*self.k, *self.v):
            pool[dst, :num_tokens] = pool[src, :num_tokens]

    def read_blocks(self, block_ids: list[int]) -> bytes:
        """Raw bytes of these blocks: for each layer, K then V, blocks in order."""
        idx = torch.tensor(block_ids, dtype=torch.int64, device=self.k[0].device)
        parts = [
            pool.index_select(0, idx).cpu().contiguous()
            for layer in zip(self.k, self.v, strict=True)
            for pool in layer
        ]
        return b"".join(p.view(torch.uint8).numpy().tobytes() for p in parts)

    def write_blocks(self, block_ids: list[int], data: bytes) -> None:
        """Inverse of read_blocks."""
        idx = torch.tensor(block_ids, dtype=torch.int64, device=self.k[0].device)
        per_pool = len(block_ids) * self.k[0][0].numel() * self.k[0].element_size()
        if len(data) != per_pool * 2 * len(self.k):
            raise EngineError(
                f"KV snapshot has {len(data)} bytes, expected {per_pool * 2 * len(self.k)}"
            )
        buf = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        pools = [pool for layer in zip(self.k, self.v, strict=True) for pool in layer]
        for i, pool in enumerate(pools):
            chunk = (
                buf[i * per_pool : (i + 1) * per_pool]
                .view(self.dtype)
                .view(len(block_ids), *pool.shape[1:])
            )
            pool.index_copy_(0, idx, chunk.to(pool.device))
