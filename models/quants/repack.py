"""Repack GGUF weights for the torch runner's quantized linear, and the matching matmul.

API (the runner's QuantLinear builds on it):
    auto_target(qtype) -> "int4" | "int8" | "bf16"     the DESIGN mapping
    repack(raw, qtype, shape, target="auto", device="cpu", dtype=torch.bfloat16) -> PackedWeight
    matmul(x, packed) -> x @ W.T                        x (..., in_features) -> (..., out_features)
    packed_to_float(packed) -> float32 (out, in)        the weights it stands for (checks only)

`shape` is (out_features, in_features) in numpy order, as for `quants.dequantize`; `raw` is the
GGUF bytes (numpy or torch). A float torch tensor works too (its bytes, with qtype F32/F16/BF16):
that is the on-load quantization of safetensors weights.
Kinds:
    int4: weight is torch's packed int4 (CPU: `_convert_weight_to_int4pack_for_cpu` of int32
          (N, K) values 0..15 -> uint8 (N, K/2); CUDA/MPS: `_convert_weight_to_int4pack` of uint8
          (N, K/2), the even column in the high nibble, with inner_k_tiles), scales_and_zeros
          (K/32, N, 2) in `dtype`, meaning w = (q - 8) * scale + zero (see quants_int4).
    int8: weight int8 (N, K), scales (N,) in `dtype`: w = q * scale[n] (per output channel).
    int4x2: two int4 weights added (this one and `residual`): exact for Q5_0/Q5_1/Q5_K/Q8_0 up
          to bf16 scale rounding, 1.25 bytes per weight, two int4 matmuls (see quants_int4).
    bf16: weight (N, K) in `dtype`.
The activation dtype of `matmul` follows `dtype` (x is cast to it, the result cast back).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import torch
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

from ember.models.errors import ModelFileError
from ember.models.quants.dequant import DEQUANTIZERS, byte_rows, chunk_rows, dequantize, row_layout
from ember.models.quants.int4 import GROUP_SIZE, int4_groups, int4x2_groups
from ember.models.quants.int4pack import pack_rows

Kind = Literal["int4", "int4x2", "int8", "bf16"]
Target = Literal["int4", "int4x2", "int8", "bf16", "auto"]
T = GGMLQuantizationType

_AUTO: dict[GGMLQuantizationType, Kind] = {
    **dict.fromkeys((T.Q4_0, T.Q4_1, T.Q4_K, T.IQ4_NL, T.IQ4_XS), "int4"),
    **dict.fromkeys((T.Q5_0, T.Q5_1, T.Q5_K, T.Q6_K, T.Q8_0), "int8"),
    # 2/3-bit: int4 keeps the memory (and decode bandwidth) near the file's; the error is in docs.
    **dict.fromkeys((T.Q2_K, T.Q3_K), "int4"),
    **dict.fromkeys((T.F32, T.F16, T.BF16), "bf16"),
}


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
    residual: PackedWeight | None = None  # int4x2: the low int4 part, added to this one

    @property
    def dtype(self) -> torch.dtype:
        """The activation (and scale) dtype this weight runs with."""
        ref = self.scales_and_zeros if self.kind in ("int4", "int4x2") else self.scales
        return (ref if ref is not None else self.weight).dtype

    @property
    def nbytes(self) -> int:
        """Bytes held by the packed tensors."""
        parts = (self.weight, self.scales_and_zeros, self.scales)
        own = sum(p.numel() * p.element_size() for p in parts if p is not None)
        return own + (self.residual.nbytes if self.residual is not None else 0)


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
    if kind in ("int4", "int4x2"):
        return _repack_int4(raw, qtype, shape, dev, dtype, two_parts=kind == "int4x2")
    if kind == "int8":
        return _repack_int8(raw, qtype, shape, dev, dtype)
    if kind == "bf16":
        w = dequantize(raw, qtype, shape).to(dtype)
        return PackedWeight("bf16", int(shape[0]), int(shape[1]), w.to(dev))
    raise ModelFileError(f"unknown repack target {target!r}: use int4, int4x2, int8, bf16 or auto")


def _repack_int4(
    raw: Any,
    qtype: GGMLQuantizationType,
    shape: Any,
    device: torch.device,
    dtype: torch.dtype,
    two_parts: bool,
) -> PackedWeight:
    rows, cols, _ = row_layout(qtype, shape)
    data = byte_rows(raw, qtype, shape)  # (rows, bytes per row)
    deq = DEQUANTIZERS[qtype]
    if two_parts:
        parts = pack_rows(
            data, qtype, cols, lambda b: int4x2_groups(qtype, b, deq, dtype), 2, device, dtype
        )
        (w_hi, sz_hi), (w_lo, sz_lo) = parts
        lo = PackedWeight("int4", rows, cols, w_lo, scales_and_zeros=sz_lo)
        return PackedWeight("int4x2", rows, cols, w_hi, scales_and_zeros=sz_hi, residual=lo)
    ((weight, sz),) = pack_rows(
        data, qtype, cols, lambda b: (int4_groups(qtype, b, deq, dtype),), 1, device, dtype
    )
    return PackedWeight("int4", rows, cols, weight, scales_and_zeros=sz)


def _split_blocks(chunk: torch.Tensor, qtype: GGMLQuantizationType) -> torch.Tensor:
    """uint8 rows (R, row_bytes) -> (R * blocks per row, block_bytes)."""
    return chunk.reshape(-1, GGML_QUANT_SIZES[qtype][1])


def _repack_int8(
    raw: Any, qtype: GGMLQuantizationType, shape: Any, device: torch.device, dtype: torch.dtype
) -> PackedWeight:
    # Per output channel: s = max|w| / 127 (rounded to dtype first), q = round(w / s).
    rows, cols, _ = row_layout(qtype, shape)
    data = byte_rows(raw, qtype, shape)
    weight = torch.empty(rows, cols, dtype=torch.int8)
    scales = torch.empty(rows, dtype=dtype)
    step = chunk_rows(cols)
    for start in range(0, rows, step):
        chunk = data[start : start + step]
        w = DEQUANTIZERS[qtype](_split_blocks(chunk, qtype)).view(chunk.shape[0], cols)
        # amax and amin: each far faster than one aminmax(dim=1) on torch 2.13 CPU.
        s = (torch.maximum(w.amax(dim=1), -w.amin(dim=1)) / 127.0).to(dtype)  # (R,)
        s32 = s.to(torch.float32).unsqueeze(1)
        inv = torch.where(s32 == 0, 0.0, 1.0 / s32)
        q = w.mul_(inv).round_().clamp_(-128, 127)  # in place: w is a temporary
        weight[start : start + chunk.shape[0]] = q.to(torch.int8)
        scales[start : start + chunk.shape[0]] = s
    return PackedWeight("int8", rows, cols, weight.to(device), scales=scales.to(device))


def _has_kernel(op: str, device: torch.device) -> bool:
    key = {"cpu": "CPU", "cuda": "CUDA", "mps": "MPS"}.get(device.type, device.type.upper())
    return bool(torch._C._dispatch_has_kernel_for_dispatch_key(op, key))


def _int4_mm(x2: torch.Tensor, packed: PackedWeight) -> torch.Tensor:
    """(M, K) @ an int4 weight -> (M, N_padded)."""
    if x2.device.type == "cpu":
        op = torch.ops.aten._weight_int4pack_mm_for_cpu
    else:
        op = torch.ops.aten._weight_int4pack_mm
    return op(x2, packed.weight, packed.group_size, packed.scales_and_zeros)


def matmul(x: torch.Tensor, packed: PackedWeight) -> torch.Tensor:
    """x (..., in_features) @ W.T -> (..., out_features), in x's dtype, with the packed op."""
    lead = x.shape[:-1]
    x2 = x.reshape(-1, packed.in_features).to(packed.dtype).contiguous()  # (M, K)
    if packed.kind in ("int4", "int4x2"):
        out = _int4_mm(x2, packed)
        if packed.residual is not None:
            out = out + _int4_mm(x2, packed.residual)
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
    as_f32 = PackedWeight(
        "int4", packed.out_features, packed.in_features, packed.weight,
        scales_and_zeros=packed.scales_and_zeros.to(torch.float32),
    )  # fmt: skip
    w = _int4_mm(eye, as_f32)[:, : packed.out_features].T.contiguous()
    return w + packed_to_float(packed.residual) if packed.residual is not None else w
