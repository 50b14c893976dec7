"""torch's packed int4 layouts: GGUF rows -> (packed weight, scales_and_zeros) per int4 part.

CPU: `_convert_weight_to_int4pack_for_cpu` takes int32 (N, K) values 0..15 and gives uint8
(N, K/2), packing rows in blocks of 64 (so chunks of whole 64-row blocks concatenate), N a
multiple of 16. CUDA/MPS: `_convert_weight_to_int4pack` takes uint8 (N, K/2) with the even
column in the high nibble, and inner_k_tiles in (2, 4, 8) with K % (16 * inner_k_tiles) == 0,
N a multiple of 8. Both use scales_and_zeros (K/group, N, 2): w = (q - 8) * scale + zero.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

from ember.models.errors import ModelFileError
from ember.models.quants.dequant import chunk_rows
from ember.models.quants.int4 import GROUP_SIZE, Int4Part

# The CPU int4 layout packs rows in blocks of 64: chunks are whole blocks, so they concatenate.
ROW_BLOCK = 64
# Output rows must be a multiple of this for the int4 ops (CPU 16, CUDA 8); we pad with zeros.
ROW_MULTIPLE = 16

# uint8 blocks of whole rows -> one or more int4 parts whose weights add up.
PartsFn = Callable[[torch.Tensor], tuple[Int4Part, ...]]


def inner_k_tiles(in_features: int) -> int:
    """The largest inner_k_tiles (8, 4, 2) the CUDA layout allows: K % (tiles * 16) == 0."""
    return next(t for t in (8, 4, 2) if in_features % (t * 16) == 0)


def pack_int4(q: torch.Tensor, device: torch.device) -> torch.Tensor:
    """int32 (N, K) values 0..15 -> torch's packed int4 weight for `device`."""
    if device.type == "cpu":
        return torch.ops.aten._convert_weight_to_int4pack_for_cpu(q, 1)
    pairs = ((q[:, ::2] << 4) | q[:, 1::2]).to(torch.uint8)  # (N, K/2), even column high
    return torch.ops.aten._convert_weight_to_int4pack(pairs.to(device), inner_k_tiles(q.shape[1]))


def pack_rows(
    data: torch.Tensor,
    qtype: GGMLQuantizationType,
    cols: int,
    parts_fn: PartsFn,
    n_parts: int,
    device: torch.device,
    dtype: torch.dtype,
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """uint8 rows (N, row_bytes) -> per part (packed weight, scales_and_zeros (K/32, N_pad, 2))."""
    if cols % GROUP_SIZE:
        raise ModelFileError(f"int4 needs in_features divisible by {GROUP_SIZE}, got {cols}")
    rows, groups = data.shape[0], cols // GROUP_SIZE
    padded = -(-rows // ROW_MULTIPLE) * ROW_MULTIPLE
    # Padding rows: q = 8, scale 0, zero 0 -> weight 0.
    sz = [torch.zeros(padded, groups, 2, dtype=dtype) for _ in range(n_parts)]
    packed: list[list[torch.Tensor]] = [[] for _ in range(n_parts)]
    step = chunk_rows(cols, ROW_BLOCK)
    for start in range(0, padded, step):
        stop = min(start + step, padded)
        real = max(0, min(stop, rows) - start)
        qs = [torch.empty(stop - start, cols, dtype=torch.int32) for _ in range(n_parts)]
        for q_part in qs:
            q_part[real:] = 8
        if real:
            blocks = data[start : start + real].reshape(-1, GGML_QUANT_SIZES[qtype][1])
            for i, (q, scale, zero) in enumerate(parts_fn(blocks)):
                qs[i][:real] = q.view(real, cols)
                sz[i][start : start + real, :, 0] = scale.view(real, groups)
                sz[i][start : start + real, :, 1] = zero.view(real, groups)
        for i in range(n_parts):
            packed[i].append(pack_int4(qs[i], device))
    return [
        (torch.cat(p) if len(p) > 1 else p[0], s.transpose(0, 1).contiguous().to(device))
        for p, s in zip(packed, sz, strict=True)
    ]
