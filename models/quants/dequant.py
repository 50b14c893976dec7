"""GGUF tensor formats -> torch: exact dequantizers (the torch runner packs from these).

API:
    dequantize(raw, qtype, shape) -> float32 tensor of `shape`
    dequantize_rows(raw, qtype, shape, row_ids) -> float32 (len(row_ids), cols), touching only
        those rows' bytes (embedding lookups straight from the mmap)

`shape` is in numpy order (rows, cols) (or (..., cols)): cols is ggml's ne0, the innermost,
block-quantized dimension. `raw` is a uint8 numpy array or torch tensor holding exactly the
tensor's bytes (a zero-copy mmap view is fine: it is only read). `qtype` is a
gguf.GGMLQuantizationType. Results are bit-identical to `gguf.quants.dequantize` in float32.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

from ember.models.errors import ModelFileError
from ember.models.quants import k_quants as k
from ember.models.quants import legacy
from ember.models.quants.mxfp4 import dequant_mxfp4

T = GGMLQuantizationType
BlockFn = Callable[[torch.Tensor], torch.Tensor]


def _f32(blocks: torch.Tensor) -> torch.Tensor:
    return blocks.contiguous().view(torch.float32)


def _f16(blocks: torch.Tensor) -> torch.Tensor:
    return blocks.contiguous().view(torch.float16).to(torch.float32)


def _bf16(blocks: torch.Tensor) -> torch.Tensor:
    return blocks.contiguous().view(torch.bfloat16).to(torch.float32)


# qtype -> function of uint8 blocks (n_blocks, type_size) -> float32 (n_blocks, block_size).
# The float types use "blocks" of one element.
DEQUANTIZERS: dict[GGMLQuantizationType, BlockFn] = {
    T.F32: _f32,
    T.F16: _f16,
    T.BF16: _bf16,
    T.Q4_0: legacy.dequant_q4_0,
    T.Q4_1: legacy.dequant_q4_1,
    T.Q5_0: legacy.dequant_q5_0,
    T.Q5_1: legacy.dequant_q5_1,
    T.Q8_0: legacy.dequant_q8_0,
    T.IQ4_NL: legacy.dequant_iq4_nl,
    T.Q2_K: k.dequant_q2_k,
    T.Q3_K: k.dequant_q3_k,
    T.Q4_K: k.dequant_q4_k,
    T.Q5_K: k.dequant_q5_k,
    T.Q6_K: k.dequant_q6_k,
    T.IQ4_XS: k.dequant_iq4_xs,
    T.MXFP4: dequant_mxfp4,
}

SUPPORTED_TYPES: tuple[GGMLQuantizationType, ...] = tuple(DEQUANTIZERS)

# Elements processed per step: the float temporaries (1 MB each) stay in the L2 cache, which
# measured 2x faster than 4 MB chunks; it also bounds the extra memory.
CHUNK_ELEMENTS = 1 << 18


def chunk_rows(cols: int, multiple: int = 1) -> int:
    """Rows per step for rows of `cols` elements: about CHUNK_ELEMENTS, a multiple of `multiple`."""
    rows = max(1, CHUNK_ELEMENTS // max(cols, 1))
    return max(multiple, rows // multiple * multiple)


def block_layout(qtype: GGMLQuantizationType) -> tuple[int, int]:
    """(elements per block, bytes per block) of a supported type, else ModelFileError."""
    if qtype not in DEQUANTIZERS:
        name = getattr(qtype, "name", str(qtype))
        supported = ", ".join(t.name for t in SUPPORTED_TYPES)
        raise ModelFileError(f"unsupported tensor type {name}: supported are {supported}")
    return GGML_QUANT_SIZES[qtype]


def as_uint8_tensor(raw: Any) -> torch.Tensor:
    """A flat uint8 tensor sharing memory with `raw` (numpy array, memmap, buffer or tensor)."""
    if isinstance(raw, torch.Tensor):
        return raw.reshape(-1).view(torch.uint8) if raw.dtype != torch.uint8 else raw.reshape(-1)
    arr = np.asarray(raw)
    if arr.dtype != np.uint8:
        arr = arr.view(np.uint8)
    with warnings.catch_warnings():
        # A read-only mmap view: torch warns that writes would be undefined; we only read.
        warnings.simplefilter("ignore", UserWarning)
        return torch.from_numpy(arr.reshape(-1))


def row_layout(qtype: GGMLQuantizationType, shape: Sequence[int]) -> tuple[int, int, int]:
    """(rows, cols, bytes per row) of a tensor of `shape`; ModelFileError if cols can't block."""
    block_elements, block_bytes = block_layout(qtype)
    if len(shape) == 0 or any(int(s) < 0 for s in shape):
        raise ModelFileError(f"bad tensor shape {tuple(shape)} for {qtype.name}")
    cols = int(shape[-1])
    if cols % block_elements:
        raise ModelFileError(
            f"{qtype.name} rows of {cols} elements are not a multiple of its block of {block_elements}"
        )
    rows = math.prod(int(s) for s in shape[:-1])
    return rows, cols, cols // block_elements * block_bytes


def byte_rows(raw: Any, qtype: GGMLQuantizationType, shape: Sequence[int]) -> torch.Tensor:
    """raw bytes -> uint8 (rows, bytes per row) sharing memory, checking the byte count."""
    rows, _, row_bytes = row_layout(qtype, shape)
    data = as_uint8_tensor(raw)
    if data.numel() != rows * row_bytes:
        raise ModelFileError(
            f"{qtype.name} tensor of shape {tuple(shape)} needs {rows * row_bytes} bytes, got {data.numel()}"
        )
    return data.view(rows, row_bytes)


def _dequantize_rows_into(
    out: torch.Tensor, rows: torch.Tensor, qtype: GGMLQuantizationType
) -> torch.Tensor:
    """Dequantize uint8 rows (R, row_bytes) into float32 out (R, cols), a chunk of rows at a time."""
    fn = DEQUANTIZERS[qtype]
    block_elements, block_bytes = GGML_QUANT_SIZES[qtype]
    cols = out.shape[1]
    step = chunk_rows(cols)
    for start in range(0, rows.shape[0], step):
        chunk = rows[start : start + step]
        blocks = chunk.reshape(-1, block_bytes)
        out[start : start + step] = fn(blocks).view(chunk.shape[0], cols)
    return out


def dequantize(raw: Any, qtype: GGMLQuantizationType, shape: Sequence[int]) -> torch.Tensor:
    """Dequantize a whole GGUF tensor to float32 of `shape` (numpy order, cols = ne0 last)."""
    rows = byte_rows(raw, qtype, shape)
    out = torch.empty(rows.shape[0], int(shape[-1]), dtype=torch.float32)
    return _dequantize_rows_into(out, rows, qtype).view(*(int(s) for s in shape))


def dequantize_rows(
    raw: Any, qtype: GGMLQuantizationType, shape: Sequence[int], row_ids: Any
) -> torch.Tensor:
    """Dequantize only rows `row_ids` of a (rows, cols) GGUF tensor -> float32 (len(ids), cols)."""
    rows = byte_rows(raw, qtype, shape)
    ids = torch.as_tensor(row_ids, dtype=torch.int64).reshape(-1)
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= rows.shape[0]):
        raise ModelFileError(
            f"row ids out of range for a {qtype.name} tensor of {rows.shape[0]} rows"
        )
    picked = rows.index_select(0, ids)  # copies only the requested rows' bytes
    out = torch.empty(ids.numel(), int(shape[-1]), dtype=torch.float32)
    return _dequantize_rows_into(out, picked, qtype)


__all__ = [
    "DEQUANTIZERS",
    "SUPPORTED_TYPES",
    "block_layout",
    "byte_rows",
    "chunk_rows",
    "dequantize",
    "dequantize_rows",
    "row_layout",
]
