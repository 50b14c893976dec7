"""Quantized weight forms for torch's kernels.

int4 (`_weight_int4pack_mm*`): codes q in 0..15 per weight, per group of 32 inputs a (scale,
zero) pair: w = (q - 8) * scale + zero. int8 (`_weight_int8pack_mm`): w = q * scale per output
row. int8g: 8 bits per weight with a (scale, zero) per group of 32, run as two int4 planes (side
by side along K, so one kernel call over [x, x] computes both):
c = 16 h + l in 0..255, w = lo + s c = [(l - 8) s + (lo + 8 s)] + [(h - 8) 16 s + 128 s].
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

INT4_GROUP = 32
INT4_INNER_K_TILES = 8  # CUDA layout parameter


@dataclass
class Int4Weight:
    """int4 weights packed for torch, with (scale, zero) per group of 32 inputs."""

    packed: torch.Tensor  # CPU: uint8 (N, K/2); CUDA: int32 tiles
    scales_zeros: torch.Tensor  # (K/32, N, 2) in the activation dtype (the kernels require it)
    out_features: int
    in_features: int

    def dequantize(self, dtype: torch.dtype) -> torch.Tensor:
        """Dense (N, K) weights (multiplies the identity: for tests and rare use)."""
        eye = torch.eye(self.in_features, dtype=dtype, device=self.packed.device)
        return int4_matmul(eye, self).t().contiguous()


@dataclass
class Int4Codes:
    """Unpacked int4 form: codes (N, K) int32 0..15, scale and zero (N, K/32) float32."""

    q: torch.Tensor
    scale: torch.Tensor
    zero: torch.Tensor

    def pack(self, dtype: torch.dtype, device: torch.device) -> Int4Weight:
        """Pack for the kernels of device, with scales in the activation dtype."""
        sz = torch.stack((self.scale, self.zero), dim=-1).transpose(0, 1).contiguous().to(dtype)
        return pack_int4(self.q, sz, device)

    def dense(self) -> torch.Tensor:
        """float32 (N, K) weights this form stands for."""
        n, k = self.q.shape
        groups = self.q.view(n, k // INT4_GROUP, INT4_GROUP).float() - 8.0
        return (groups * self.scale[..., None] + self.zero[..., None]).view(n, k)


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


def _groups(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    out_f, in_f = w.shape
    if in_f % INT4_GROUP:
        raise ValueError(
            f"group quantization needs in_features divisible by {INT4_GROUP}, got {in_f}"
        )
    g = w.float().reshape(out_f, in_f // INT4_GROUP, INT4_GROUP)
    return g, g.amin(dim=-1), g.amax(dim=-1)


def quantize_int8g(w: torch.Tensor) -> tuple[Int4Codes, Int4Codes]:
    """8-bit min-max per group of 32, split into (low, high) int4 planes whose sum is w."""
    g, lo, hi = _groups(w)
    s = ((hi - lo) / 255.0).clamp(min=1e-12)
    c = torch.round((g - lo[..., None]) / s[..., None]).clamp(0, 255).to(torch.int32)
    low = Int4Codes((c % 16).reshape(w.shape), s, lo + 8.0 * s)
    high = Int4Codes((c // 16).reshape(w.shape), 16.0 * s, 128.0 * s)
    return low, high


def pack_int4(q: torch.Tensor, scales_zeros: torch.Tensor, device: torch.device) -> Int4Weight:
    """Pack int32 codes (N, K) in 0..15 with (K/32, N, 2) scale/zero for `device`."""
    out_f, in_f = q.shape
    if device.type == "cpu":
        packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(
            q.contiguous(), INT4_INNER_K_TILES
        )
    else:
        # CUDA layout: the uint8 input holds two codes per byte, even column in the high nibble
        q8 = (q[:, ::2] << 4 | q[:, 1::2]).to(torch.uint8).to(device)
        tiles = next(t for t in (8, 4, 2) if in_f % (t * 16) == 0)
        packed = torch.ops.aten._convert_weight_to_int4pack(q8, tiles)
    return Int4Weight(packed, scales_zeros.to(device), out_f, in_f)


def int4_matmul(x: torch.Tensor, w: Int4Weight) -> torch.Tensor:
    """x (T, K) @ w.T -> (T, N) in x's dtype."""
    if x.device.type == "cpu":
        return torch.ops.aten._weight_int4pack_mm_for_cpu(x, w.packed, INT4_GROUP, w.scales_zeros)
    return torch.ops.aten._weight_int4pack_mm(x, w.packed, INT4_GROUP, w.scales_zeros)


def int8_matmul(x: torch.Tensor, w: Int8Weight) -> torch.Tensor:
    """x (T, K) @ w.T -> (T, N)."""
    return torch.ops.aten._weight_int8pack_mm(x, w.q, w.scales)
