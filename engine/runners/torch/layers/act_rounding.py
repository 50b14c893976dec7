"""The native kernels' 8-bit rounding of activations, in torch, for the dense prefill path.

A native linear multiplies a batch of fewer than DENSE_PREFILL_TOKENS rows in its GGUF blocks
with each activation row rounded to 8-bit blocks (act_quant.c, like llama.cpp): q8_0 for the
32-weight formats (d = max|x| / 127 per 32 values, d stored at half precision), q8_K for the
k-quants (per 256 values, d in float32); float weights see float32 activations. Larger batches
run as float32 matmuls over the dequantized weight; rounding their activations the same way
first gives one rounding path for every batch size, so a prompt's logits no longer depend on
how much of it came from the prefix cache (a cached prompt's short suffix runs on the kernels,
a fresh one densely: a near tie could break differently, TORCH_CACHE_HIT). What stays apart
is float32 summation order, ~1e-7 relative, not 8-bit steps of ~0.4%.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from ember.engine.runners.torch.native import structs as S

if TYPE_CHECKING:
    from ember.engine.runners.torch.native.kernels import NativeLinear


def round_blocks(x: torch.Tensor, block: int, half_scale: bool) -> torch.Tensor:
    """x (T, K) float32 rounded as act_quant.c does: q = nearbyint(x * (127 / amax)) clamped to
    +-127 per block (round half to even, like nearbyintf), times d = amax / 127."""
    xb = x.reshape(-1, block)
    amax = xb.abs().amax(1, keepdim=True)
    inv = torch.where(amax > 0, 127.0 / amax, torch.zeros_like(amax))
    q = torch.round(xb * inv).clamp_(-127, 127)
    d = amax / 127.0
    if half_scale:
        d = d.half().float()
    return (q * d).reshape(x.shape)


def block_of(qtype: int) -> int:
    """Activation block of a weight type: 32 (q8_0), 256 (q8_K) or 0 (float32, no rounding)."""
    return S.BLOCK_COLS.get(qtype, 0)


def rounded(x: torch.Tensor, block: int) -> torch.Tensor:
    return x if block == 0 else round_blocks(x, block, half_scale=block == 32)


def output_blocks(native: NativeLinear) -> np.ndarray:
    """Per fused output column (after the output map), its part's activation block."""
    desc = native.desc
    per_row = np.concatenate(
        [np.full(desc.part[i].rows, block_of(desc.part[i].type)) for i in range(desc.n_parts)]
    )
    perm = native.out_permutation()
    if perm is None:
        return per_row
    columns = np.empty_like(per_row)
    columns[perm.numpy()] = per_row
    return columns


def dense_product(x: torch.Tensor, w: torch.Tensor, blocks: np.ndarray) -> torch.Tensor:
    """x (T, in) @ w (out, in)^T with each output column's activations rounded for its block."""
    kinds = np.unique(blocks)
    if len(kinds) == 1:
        return torch.nn.functional.linear(rounded(x, int(kinds[0])), w)
    y = torch.empty(x.shape[0], w.shape[0], dtype=torch.float32)
    for kind in kinds:
        cols = torch.from_numpy(np.flatnonzero(blocks == kind))
        y[:, cols] = torch.nn.functional.linear(rounded(x, int(kind)), w[cols])
    return y
