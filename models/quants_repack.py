"""Repack GGUF weights for the torch runner's quantized linear, and the matching matmul.

API (the runner's QuantLinear builds on it):
    auto_target(qtype) -> "int4" | "int8" | "bf16"     the DESIGN mapping
    repack(raw, qtype, shape, target="auto", device="cpu", dtype=torch.bfloat16) -> PackedWeight
    matmul(x, packed) -> x @ W.T                        x (..., in_features) -> (..., out_features)

`shape` is (out_features, in_features) in numpy order, as for `quants.dequantize`.
Kinds:
    int4: weight is torch's packed int4 (CPU: `_convert_weight_to_int4pack_for_cpu` of int32
          (N, K) values 0..15 -> uint8 (N, K/2); CUDA/MPS: `_convert_weight_to_int4pack` of uint8
          (N, K/2), the even column in the high nibble, with inner_k_tiles), scales_and_zeros
          (K/32, N, 2) in `dtype`, meaning w = (q - 8) * scale + zero (see quants_int4).
    int8: weight int8 (N, K), scales (N,) in `dtype`: w = q * scale[n] (per output channel).
    bf16: weight (N, K) in `dtype`.
The activation dtype of `matmul` follows `dtype` (x is cast to it, the result cast back).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import torch
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

from ember.models.errors import ModelFileError
from ember.models.quants import DEQUANTIZERS, _blocks_of, dequantize, row_layout
from ember.models.quants_int4 import GROUP_SIZE, int4_groups

Kind = Literal["int4", "int8", "bf16"]
Target = Literal["int4", "int8", "bf16", "auto"]
T = GGMLQuantizationType

_AUTO: dict[GGMLQuantizationType, Kind] = {
    **dict.fromkeys((T.Q4_0, T.Q4_1, T.Q4_K, T.IQ4_NL, T.IQ4_XS), "int4"),
    **dict.fromkeys((T.Q5_0, T.Q5_1, T.Q5_K, T.Q6_K, T.Q8_0), "int8"),
    # 2/3-bit: int4 keeps the memory (and decode bandwidth) near the file's; the error is in docs.
    **dict.fromkeys((T.Q2_K, T.Q3_K), "int4"),
    **dict.fromkeys((T.F32, T.F16, T.BF16), "bf16"),
}

# Rows repacked per step (a multiple of 64: the CPU int4 layout packs rows in blocks of 64).
CHUNK_ROWS = 4096
# Output rows must be a multiple of this for the int4 ops (CPU 16, CUDA 8); we pad with zeros.
_ROW_MULTIPLE = 16


@dataclass(frozen=True)
class PackedWeight:
    """A linear weight (out_features, in_features) in one of the runner's torch forms."""

    kind: Kind
    out_features: int
    in_features: int
    weight: torch.Tensor
    scales_and_zeros: torch.Tensor | None = None  # int4: (K/group, N_padded, 2)
    scales: torch.Tensor | None = None  # int8: (N,)
    group_size: int = GROUP_SIZE

    @property
    def dtype(self) -> torch.dtype:
        """The activation (and scale) dtype this weight runs with."""
        ref = self.scales_and_zeros if self.kind == "int4" else self.scales
        return (ref if ref is not None else self.weight).dtype

    @property
    def nbytes(self) -> int:
        """Bytes held by the packed tensors."""
        parts = (self.weight, self.scales_and_zeros, self.scales)
        return sum(p.numel() * p.element_size() for p in parts if p is not None)


def auto_target(qtype: GGMLQuantizationType) -> Kind:
    """The torch form DESIGN.md maps a GGUF type to (int4, int8 or bf16)."""
    if qtype not in _AUTO:
        name = getattr(qtype, "name", str(qtype))
        raise ModelFileError(f"unsupported tensor type {name} for the torch runner")
    return _AUTO[qtype]


def repack(
    raw: Any,
    qtype: GGMLQuantizationType,
    shape: tuple[int, int] | list[int],
    target: Target = "auto",
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.bfloat16,
) -> PackedWeight:
    """Convert a GGUF weight (out_features, in_features) into a PackedWeight on `device`."""
    if len(shape) != 2:
        raise ModelFileError(f"a linear weight must be 2-D, got shape {tuple(shape)}")
    kind = auto_target(qtype) if target == "auto" else target
    dev = torch.device(device)
    if kind == "int4":
        return _repack_int4(raw, qtype, shape, dev, dtype)
    if kind == "int8":
        return _repack_int8(raw, qtype, shape, dev, dtype)
    if kind == "bf16":
        w = dequantize(raw, qtype, shape).to(dtype)
        return PackedWeight("bf16", int(shape[0]), int(shape[1]), w.to(dev))
    raise ModelFileError(f"unknown repack target {target!r}: use int4, int8, bf16 or auto")


def _inner_k_tiles(in_features: int) -> int:
    """The largest inner_k_tiles (8, 4, 2) the CUDA layout allows: K % (tiles * 16) == 0."""
    return next(t for t in (8, 4, 2) if in_features % (t * 16) == 0)


def _pack_int4(q: torch.Tensor, device: torch.device) -> torch.Tensor:
    """int32 (N, K) values 0..15 -> torch's packed int4 weight for `device`."""
    if device.type == "cpu":
        return torch.ops.aten._convert_weight_to_int4pack_for_cpu(q, 1)
    pairs = ((q[:, ::2] << 4) | q[:, 1::2]).to(torch.uint8)  # (N, K/2), even column high
    return torch.ops.aten._convert_weight_to_int4pack(pairs.to(device), _inner_k_tiles(q.shape[1]))


def _repack_int4(
    raw: Any, qtype: GGMLQuantizationType, shape: Any, device: torch.device, dtype: torch.dtype
) -> PackedWeight:
    rows, cols, _ = row_layout(qtype, shape)
    if cols % GROUP_SIZE:
        raise ModelFileError(f"int4 needs in_features divisible by {GROUP_SIZE}, got {cols}")
    data = _blocks_of(raw, qtype, shape)  # (rows, bytes per row)
    padded = -(-rows // _ROW_MULTIPLE) * _ROW_MULTIPLE
    groups_per_row = cols // GROUP_SIZE
    packed, sz = [], torch.empty(padded, groups_per_row, 2, dtype=dtype)
    sz[rows:] = 0  # padding rows: scale 0, zero 0 -> weight 0
    for start in range(0, padded, CHUNK_ROWS):
        stop = min(start + CHUNK_ROWS, padded)
        q = torch.full((stop - start, cols), 8, dtype=torch.int32)
        if start < rows:
            real = min(stop, rows) - start
            chunk = data[start : start + real]
            blocks = _split_blocks(chunk, qtype)
            gq, scale, zero = int4_groups(qtype, blocks, DEQUANTIZERS[qtype], dtype)
            q[:real] = gq.view(real, cols)
            sz[start : start + real, :, 0] = scale.view(real, groups_per_row)
            sz[start : start + real, :, 1] = zero.view(real, groups_per_row)
        packed.append(_pack_int4(q, device))
    weight = torch.cat(packed) if len(packed) > 1 else packed[0]
    sz_t = sz.transpose(0, 1).contiguous().to(device)  # (K/32, N_padded, 2)
    return PackedWeight("int4", rows, cols, weight, scales_and_zeros=sz_t)


def _split_blocks(chunk: torch.Tensor, qtype: GGMLQuantizationType) -> torch.Tensor:
    """uint8 rows (R, row_bytes) -> (R * blocks per row, block_bytes)."""
    return chunk.reshape(-1, GGML_QUANT_SIZES[qtype][1])


def _repack_int8(
    raw: Any, qtype: GGMLQuantizationType, shape: Any, device: torch.device, dtype: torch.dtype
) -> PackedWeight:
    # Per output channel: s = max|w| / 127 (rounded to dtype first), q = round(w / s).
    rows, cols, _ = row_layout(qtype, shape)
    data = _blocks_of(raw, qtype, shape)
    weight = torch.empty(rows, cols, dtype=torch.int8)
    scales = torch.empty(rows, dtype=dtype)
    for start in range(0, rows, CHUNK_ROWS):
        chunk = data[start : start + CHUNK_ROWS]
        w = DEQUANTIZERS[qtype](_split_blocks(chunk, qtype)).view(chunk.shape[0], cols)
        s = (w.abs().amax(dim=1) / 127.0).to(dtype)
        s32 = s.to(torch.float32).unsqueeze(1)
        q = torch.round(w / torch.where(s32 == 0, 1.0, s32)).clamp_(-128, 127)
        weight[start : start + chunk.shape[0]] = q.to(torch.int8)
        scales[start : start + chunk.shape[0]] = s
    return PackedWeight("int8", rows, cols, weight.to(device), scales=scales.to(device))


def _has_kernel(op: str, device: torch.device) -> bool:
    key = {"cpu": "CPU", "cuda": "CUDA", "mps": "MPS"}.get(device.type, device.type.upper())
    return bool(torch._C._dispatch_has_kernel_for_dispatch_key(op, key))


def matmul(x: torch.Tensor, packed: PackedWeight) -> torch.Tensor:
    """x (..., in_features) @ W.T -> (..., out_features), in x's dtype, with the packed op."""
    lead = x.shape[:-1]
    x2 = x.reshape(-1, packed.in_features).to(packed.dtype).contiguous()  # (M, K)
    if packed.kind == "int4":
        sz = packed.scales_and_zeros
        if x2.device.type == "cpu":
            out = torch.ops.aten._weight_int4pack_mm_for_cpu(
                x2, packed.weight, packed.group_size, sz
            )
        else:
            out = torch.ops.aten._weight_int4pack_mm(x2, packed.weight, packed.group_size, sz)
        if out.shape[1] != packed.out_features:
            out = out[:, : packed.out_features]
    elif packed.kind == "int8":
        assert packed.scales is not None
        if _has_kernel("aten::_weight_int8pack_mm", x2.device):
            out = torch.ops.aten._weight_int8pack_mm(x2, packed.weight, packed.scales)
        else:  # no int8 kernel for this device: dequantize on the fly
            out = torch.nn.functional.linear(x2, packed.weight.to(x2.dtype)) * packed.scales
    else:
        out = torch.nn.functional.linear(x2, packed.weight)
    return out.reshape(*lead, packed.out_features).to(x.dtype)


def packed_to_float(packed: PackedWeight) -> torch.Tensor:
    """The float32 weights (out_features, in_features) a PackedWeight stands for (for checks)."""
    if packed.kind == "int8":
        assert packed.scales is not None
        return packed.weight.to(torch.float32) * packed.scales.to(torch.float32).unsqueeze(1)
    if packed.kind == "bf16":
        return packed.weight.to(torch.float32)
    assert packed.scales_and_zeros is not None
    # Multiply the identity in float32 with float32 copies of the scales: exact (q - 8) s + z.
    eye = torch.eye(packed.in_features, dtype=torch.float32, device=packed.weight.device)
    sz = packed.scales_and_zeros.to(torch.float32)
    if eye.device.type == "cpu":
        wt = torch.ops.aten._weight_int4pack_mm_for_cpu(eye, packed.weight, packed.group_size, sz)
    else:
        wt = torch.ops.aten._weight_int4pack_mm(eye, packed.weight, packed.group_size, sz)
    return wt[:, : packed.out_features].T.contiguous()
