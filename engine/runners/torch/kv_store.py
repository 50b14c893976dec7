"""Paged KV memory: per layer, K and V pools shaped (num_blocks, block_size, n_kv_heads, head_dim).

Block ids come from the engine's BlockManager; slot s of the flattened pool is token
s % block_size of block s // block_size.

Pools hold a float dtype, or int8 (`quantized`): each head's vector of each token is stored as
int8 codes q with one float32 scale s (max|x| / 127), x = s q; the scales live in k_scale /
v_scale pools shaped (num_blocks, block_size, n_kv_heads). That halves a float16 cache (for a
head dim of 128 or more) at a small, measured cost in perplexity (docs/torch-runner.md).
"""

from __future__ import annotations

import torch

from ember.engine.errors import EngineError

INT8 = torch.int8


def quantize_heads(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(T, H, D) float -> int8 codes (T, H, D) and float32 scales (T, H): x ~ scale * q."""
    xf = x.float()
    amax = xf.abs().amax(dim=-1)
    scale = amax / 127.0
    inv = torch.where(amax > 0, 127.0 / amax, torch.zeros_like(amax))
    q = torch.round(xf * inv[..., None]).clamp(-127, 127).to(INT8)
    return q, scale


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
        self.quantized = dtype == INT8
        scales = shape[:3] if self.quantized else (0,)
        f32 = torch.float32
        self.k_scale = [torch.zeros(scales, dtype=f32, device=device) for _ in range(n_layers)]
        self.v_scale = [torch.zeros(scales, dtype=f32, device=device) for _ in range(n_layers)]
        if not self.quantized:
            self.k_scale, self.v_scale = [], []

    @property
    def bytes_per_block(self) -> int:
        """K and V bytes of one block over all layers (scales included)."""
        pools = sum(t[0].numel() * t.element_size() for t in self.k)
        scales = sum(t[0].numel() * t.element_size() for t in self.k_scale)
        return 2 * (pools + scales)

    def _pools(self) -> list[torch.Tensor]:
        """Every pool, in snapshot order: per layer K, V (then their scales when quantized)."""
        out = []
        for i in range(len(self.k)):
            out += [self.k[i], self.v[i]]
            if self.quantized:
                out += [self.k_scale[i], self.v_scale[i]]
        return out

    def write(self, layer: int, slots: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """Store k, v (T, n_kv_heads, head_dim) at int64 slots (T,)."""
        for pool, scales, x in ((self.k, self.k_scale, k), (self.v, self.v_scale, v)):
            flat = pool[layer].view(-1, *x.shape[1:])
            if self.quantized:
                q, s = quantize_heads(x)
                flat.index_copy_(0, slots, q)
                scales[layer].view(-1, x.shape[1]).index_copy_(0, slots, s)
            else:
                flat.index_copy_(0, slots, x.to(self.dtype))

    def gather(
        self, layer: int, blocks: torch.Tensor, num_keys: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """K, V of the first num_keys slots of `blocks` in order: (num_keys, n_kv_heads,
        head_dim), float32 for an int8 store."""
        out = []
        for pool, scales in ((self.k, self.k_scale), (self.v, self.v_scale)):
            x = pool[layer].index_select(0, blocks).flatten(0, 1)[:num_keys]
            if self.quantized:
                s = scales[layer].index_select(0, blocks).flatten(0, 1)[:num_keys]
                x = x.float() * s[..., None]
            out.append(x)
        return out[0], out[1]

    def gather_tables(self, layer: int, tables: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """K, V of every slot of padded block tables (B, nb): (B, nb * block_size, n_kv_heads,
        head_dim) each, float32 for an int8 store (static shapes: see decode_attention.py)."""
        b, nb = tables.shape
        flat = tables.reshape(-1)
        out = []
        for pool, scales in ((self.k, self.k_scale), (self.v, self.v_scale)):
            x = pool[layer].index_select(0, flat)
            if self.quantized:
                x = x.float() * scales[layer].index_select(0, flat)[..., None]
            out.append(x.view(b, nb * self.block_size, *x.shape[2:]))
        return out[0], out[1]

    def read_keys(self, layer: int, blocks: torch.Tensor) -> torch.Tensor:
        """Float32 keys of whole blocks (B, block_size, n_kv_heads, head_dim)."""
        keys = self.k[layer].index_select(0, blocks).float()
        if self.quantized:
            keys = keys * self.k_scale[layer].index_select(0, blocks)[..., None]
        return keys

    def write_keys(self, layer: int, blocks: torch.Tensor, keys: torch.Tensor) -> None:
        """Inverse of read_keys (RoPE shifts write re-rotated keys back)."""
        if self.quantized:
            q, s = quantize_heads(keys)
            self.k[layer].index_copy_(0, blocks, q)
            self.k_scale[layer].index_copy_(0, blocks, s)
        else:
            self.k[layer].index_copy_(0, blocks, keys.to(self.dtype))

    def copy_block(self, src: int, dst: int, num_tokens: int) -> None:
        """Copy the first num_tokens slots of block src into block dst, every layer."""
        for pool in self._pools():
            pool[dst, :num_tokens] = pool[src, :num_tokens]

    def read_blocks(self, block_ids: list[int]) -> bytes:
        """Raw bytes of these blocks: for each layer K then V (then their scales), in order."""
        idx = torch.tensor(block_ids, dtype=torch.int64, device=self.k[0].device)
        parts = [pool.index_select(0, idx).cpu().contiguous() for pool in self._pools()]
        return b"".join(p.view(torch.uint8).numpy().tobytes() for p in parts)

    def write_blocks(self, block_ids: list[int], data: bytes) -> None:
        """Inverse of read_blocks."""
        idx = torch.tensor(block_ids, dtype=torch.int64, device=self.k[0].device)
        pools = self._pools()
        sizes = [len(block_ids) * p[0].numel() * p.element_size() for p in pools]
        if len(data) != sum(sizes):
            raise EngineError(f"KV snapshot has {len(data)} bytes, expected {sum(sizes)}")
        buf = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        at = 0
        for pool, size in zip(pools, sizes, strict=True):
            chunk = buf[at : at + size].view(pool.dtype).view(len(block_ids), *pool.shape[1:])
            pool.index_copy_(0, idx, chunk.to(pool.device))
            at += size
