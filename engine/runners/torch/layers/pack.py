"""Quantize float weights into the packed forms torch's CPU/CUDA kernels take: int4 group-32
(`_weight_int4pack_mm*`: w = (q - 8) * scale + zero per group) and int8 per output channel
(`_weight_int8pack_mm`: w = q * scale)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

INT4_GROUP = 32
INT4_INNER_K_TILES = 8  # CUDA layout parameter; the CPU packing ignores it


@dataclass
class Int4Weight:
    """int4 weights packed for torch, with bf16 (scale, zero) per group of 32 inputs."""

    packed: torch.Tensor  # CPU: uint8 (N, K/2); CUDA: int32 tiles
    scales_zeros: torch.Tensor  # (K/32, N, 2) in the activation dtype (the kernels require it)
    out_features: int
    in_features: int

    def dequantize(self, dtype: torch.dtype) -> torch.Tensor:
        """Dense (N, K) weights (for prefill and tests)."""
        eye = torch.eye(self.in_features, dtype=dtype, device=self.packed.device)
        return int4_matmul(eye, self).t().contiguous()


@dataclass
class Int8Weight:
    """int8 weights (N, K) with one scale per output channel."""

    q: torch.Tensor  # (N, K) int8
    scales: torch.Tensor  # (N,) in the activation dtype

    def dequantize(self, dtype: torch.dtype) -> torch.Tensor:
        """Dense (N, K) weights."""
        return self.q.to(dtype) * self.scales.to(dtype)[:, None]


def quantize_int8(w: torch.Tensor, scale_dtype: torch.dtype) -> Int8Weight:
    """Symmetric per-row int8: scale = max|w| / 127."""
    w = w.float()
    scales = (w.abs().amax(dim=1) / 127.0).clamp(min=1e-12)
    q = torch.round(w / scales[:, None]).clamp(-127, 127).to(torch.int8)
    return Int8Weight(q.contiguous(), scales.to(scale_dtype))


def quantize_int4(w: torch.Tensor, scale_dtype: torch.dtype) -> Int4Weight:
    """Asymmetric int4 over groups of 32 inputs: scale = (max - min) / 15, zero = min + 8 scale."""
    out_f, in_f = w.shape
    if in_f % INT4_GROUP:
        raise ValueError(f"int4 needs in_features divisible by {INT4_GROUP}, got {in_f}")
    groups = w.float().reshape(out_f, in_f // INT4_GROUP, INT4_GROUP)
    lo = groups.amin(dim=-1, keepdim=True)
    hi = groups.amax(dim=-1, keepdim=True)
    scale = ((hi - lo) / 15.0).clamp(min=1e-12)
    q = torch.round((groups - lo) / scale).clamp(0, 15).to(torch.int32).reshape(out_f, in_f)
    zero = lo + 8.0 * scale
    sz = torch.cat((scale, zero), dim=-1).transpose(0, 1).contiguous().to(scale_dtype)
    return pack_int4(q, sz, w.device)


def pack_int4(q: torch.Tensor, scales_zeros: torch.Tensor, device: torch.device) -> Int4Weight:
    """Pack int32 codes (N, K) in 0..15 with (K/32, N, 2) scale/zero for `device`."""
    out_f, in_f = q.shape
    if device.type == "cpu":
        packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(
            q.contiguous(), INT4_INNER_K_TILES
        )
    else:
        # CUDA layout: the uint8 input holds two codes per byte, high nibble first
        q8 = (q[:, ::2] << 4 | q[:, 1::2]).to(torch.uint8).to(device)
        packed = torch.ops.aten._convert_weight_to_int4pack(q8, INT4_INNER_K_TILES)
    return Int4Weight(packed, scales_zeros.to(device), out_f, in_f)


def int4_matmul(x: torch.Tensor, w: Int4Weight) -> torch.Tensor:
    """x (T, K) @ w.T -> (T, N) in x's dtype (bf16 on CUDA)."""
    if x.device.type == "cpu":
        return torch.ops.aten._weight_int4pack_mm_for_cpu(x, w.packed, INT4_GROUP, w.scales_zeros)
    return torch.ops.aten._weight_int4pack_mm(x, w.packed, INT4_GROUP, w.scales_zeros)


def int8_matmul(x: torch.Tensor, w: Int8Weight) -> torch.Tensor:
    """x (T, K) @ w.T -> (T, N)."""
    return torch.ops.aten._weight_int8pack_mm(x, w.q, w.scales)
