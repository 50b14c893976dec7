"""Dequantizers for ggml's 32-element block formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL).

Every function takes `blocks`, a uint8 tensor (n_blocks, type_size) of raw GGUF blocks, and
returns float32 (n_blocks, 32). The float operations are done in the same order as
`gguf.quants` (and ggml's C reference), so results are bit-identical in float32.

The 4-bit formats also expose their affine form per group of 32: w = q * a + b with q in 0..15
(`affine_*`), which the int4 repacking uses to map them onto torch's int4 layout.
"""

from __future__ import annotations

import torch

# IQ4_NL's non-linear 4-bit codebook (ggml's kvalues_iq4nl), shared with IQ4_XS.
IQ4_KVALUES = (-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113)


def f16_at(blocks: torch.Tensor, offset: int) -> torch.Tensor:
    """The fp16 at byte `offset` of every block, as float32 (n_blocks, 1)."""
    return blocks[:, offset : offset + 2].contiguous().view(torch.float16).to(torch.float32)


def low_high_nibbles(qs: torch.Tensor) -> torch.Tensor:
    """(..., B) bytes -> (..., 2B) uint8: all low nibbles first, then all high nibbles."""
    return torch.cat([qs & 0x0F, qs >> 4], dim=-1)


def bits_le(qh: torch.Tensor) -> torch.Tensor:
    """(..., B) bytes -> (..., 8B) uint8 bits, little-endian (bit j of the word is element j)."""
    shifts = torch.arange(8, dtype=torch.uint8, device=qh.device)
    return ((qh.unsqueeze(-1) >> shifts) & 1).flatten(-2)


def kvalue_lookup(q: torch.Tensor) -> torch.Tensor:
    """IQ4 codebook values (float32) for 4-bit indices q."""
    table = torch.tensor(IQ4_KVALUES, dtype=torch.float32, device=q.device)
    return table[q.to(torch.int64)]


# --- affine 4-bit forms: (q uint8 (n, 32), a (n, 1), b (n, 1)) with w = q * a + b ------------


def affine_q4_0(blocks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Q4_0 (d fp16, qs[16]): w = (q - 8) * d = q * d + (-8 d)."""
    d = f16_at(blocks, 0)
    return low_high_nibbles(blocks[:, 2:18]), d, -8.0 * d


def affine_q4_1(blocks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Q4_1 (d fp16, m fp16, qs[16]): w = q * d + m."""
    return low_high_nibbles(blocks[:, 4:20]), f16_at(blocks, 0), f16_at(blocks, 2)


def affine_q5_0(blocks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Q5_0 as (u 0..31, a, b): w = (u - 16) d = u d + (-16 d)."""
    d = f16_at(blocks, 0)
    return _q5_values(blocks[:, 2:6], blocks[:, 6:22]), d, -16.0 * d


def affine_q5_1(blocks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Q5_1 as (u 0..31, a, b): w = u d + m."""
    return _q5_values(blocks[:, 4:8], blocks[:, 8:24]), f16_at(blocks, 0), f16_at(blocks, 2)


def affine_q8_0(blocks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Q8_0 as (u 0..255, a, b): w = q d with q = u - 128, so a = d, b = -128 d."""
    d = f16_at(blocks, 0)
    q = blocks[:, 2:34].contiguous().view(torch.int8)
    return (q.to(torch.int16) + 128).to(torch.uint8), d, -128.0 * d


def dequant_q4_0(blocks: torch.Tensor) -> torch.Tensor:
    # d * (q - 8), not q*d - 8d: equal values, but only this gives -0.0 where the reference does.
    d = f16_at(blocks, 0)
    q = low_high_nibbles(blocks[:, 2:18]).to(torch.int8) - 8
    return d * q.to(torch.float32)


def dequant_q4_1(blocks: torch.Tensor) -> torch.Tensor:
    q, a, b = affine_q4_1(blocks)
    return a * q.to(torch.float32) + b


def _q5_values(qh: torch.Tensor, qs: torch.Tensor) -> torch.Tensor:
    """5-bit values 0..31: low nibbles from qs[16], bit 4 from the 32-bit little-endian qh."""
    return low_high_nibbles(qs) | (bits_le(qh) << 4)


def dequant_q5_0(blocks: torch.Tensor) -> torch.Tensor:
    """Q5_0 (d fp16, qh[4], qs[16]): w = d * (q - 16)."""
    d = f16_at(blocks, 0)
    q = _q5_values(blocks[:, 2:6], blocks[:, 6:22]).to(torch.int8) - 16
    return d * q.to(torch.float32)


def dequant_q5_1(blocks: torch.Tensor) -> torch.Tensor:
    """Q5_1 (d fp16, m fp16, qh[4], qs[16]): w = d * q + m."""
    d, m = f16_at(blocks, 0), f16_at(blocks, 2)
    q = _q5_values(blocks[:, 4:8], blocks[:, 8:24])
    return d * q.to(torch.float32) + m


def dequant_q8_0(blocks: torch.Tensor) -> torch.Tensor:
    """Q8_0 (d fp16, qs int8[32]): w = q * d."""
    d = f16_at(blocks, 0)
    q = blocks[:, 2:34].contiguous().view(torch.int8)
    return q.to(torch.float32) * d


def dequant_iq4_nl(blocks: torch.Tensor) -> torch.Tensor:
    """IQ4_NL (d fp16, qs[16]): w = d * kvalues[q]."""
    d = f16_at(blocks, 0)
    return d * kvalue_lookup(low_high_nibbles(blocks[:, 2:18]))
