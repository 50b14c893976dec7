"""Dequantizers for ggml's 256-element super-block formats (Q2_K..Q6_K, IQ4_XS).

Each takes `blocks`, a uint8 tensor (n_blocks, type_size), and returns float32 (n_blocks, 256),
doing the float math in `gguf.quants`' order so the results are bit-identical in float32.
Q4_K also exposes its affine form per group of 32 for the int4 repacking.
"""

from __future__ import annotations

import torch

from ember.models.quants.legacy import bits_le, f16_at, kvalue_lookup

QK_K = 256


def _shift_out(x: torch.Tensor, shifts: tuple[int, ...], mask: int) -> torch.Tensor:
    """(n, G, B) bytes -> (n, G, len(shifts), B): the bit-fields (x >> s) & mask."""
    s = torch.tensor(shifts, dtype=torch.uint8, device=x.device).view(1, 1, -1, 1)
    return (x.unsqueeze(2) >> s) & mask


def scale_min_k4(scales: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Q4_K/Q5_K's 12 packed bytes -> eight 6-bit scales and eight 6-bit mins, (n, 8) uint8 each.

    Bytes 0-3 hold scales 0-3 (low 6 bits) and the top 2 bits of scales 4-7; bytes 4-7 the same
    for the mins; bytes 8-11 hold the low 4 bits of scales 4-7 (low nibble) and mins 4-7 (high).
    """
    d, m, md = scales[:, 0:4], scales[:, 4:8], scales[:, 8:12]
    sc = torch.cat([d & 0x3F, (md & 0x0F) | ((d >> 2) & 0x30)], dim=-1)
    mn = torch.cat([m & 0x3F, (md >> 4) | ((m >> 2) & 0x30)], dim=-1)
    return sc, mn


def affine_q4_k(blocks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Q4_K (d, dmin fp16, scales[12], qs[128]) as (q (n, 8, 32), a (n, 8, 1), b (n, 8, 1)).

    Sub-block j of 32: w = q * (d * sc_j) - dmin * m_j, so a = d * sc_j and b = -(dmin * m_j).
    Byte chunk c of 32 holds sub-block 2c in its low nibbles and 2c+1 in its high nibbles.
    """
    n = blocks.shape[0]
    d, dmin = f16_at(blocks, 0), f16_at(blocks, 2)
    sc, mn = scale_min_k4(blocks[:, 4:16])
    a = (d * sc.to(torch.float32)).view(n, 8, 1)
    b = -(dmin * mn.to(torch.float32)).view(n, 8, 1)
    q = _shift_out(blocks[:, 16:144].reshape(n, 4, 32), (0, 4), 0x0F).reshape(n, 8, 32)
    return q, a, b


def dequant_q4_k(blocks: torch.Tensor) -> torch.Tensor:
    q, a, b = affine_q4_k(blocks)
    return (a * q.to(torch.float32) + b).reshape(-1, QK_K)


def affine_q5_k(blocks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Q5_K as (u 0..31 (n, 8, 32), a, b (n, 8, 1)): w = u (d sc_j) - dmin m_j, like Q4_K."""
    n = blocks.shape[0]
    d, dmin = f16_at(blocks, 0), f16_at(blocks, 2)
    sc, mn = scale_min_k4(blocks[:, 4:16])
    a = (d * sc.to(torch.float32)).view(n, 8, 1)
    b = -(dmin * mn.to(torch.float32)).view(n, 8, 1)
    ql = _shift_out(blocks[:, 48:176].reshape(n, 4, 32), (0, 4), 0x0F).reshape(n, 8, 32)
    qh = _shift_out(blocks[:, 16:48].reshape(n, 1, 32), tuple(range(8)), 1).reshape(n, 8, 32)
    return ql | (qh << 4), a, b


def dequant_q5_k(blocks: torch.Tensor) -> torch.Tensor:
    """Q5_K (d, dmin, scales[12], qh[32], qs[128]): like Q4_K with bit 4 of sub-block j in qh bit j."""
    u, a, b = affine_q5_k(blocks)
    return (a * u.to(torch.float32) + b).reshape(-1, QK_K)


def dequant_q6_k(blocks: torch.Tensor) -> torch.Tensor:
    """Q6_K (ql[128], qh[64], scales int8[16], d): w = d * sc_j * (q - 32), sub-blocks of 16."""
    n = blocks.shape[0]
    d = f16_at(blocks, 208)
    sc = blocks[:, 192:208].contiguous().view(torch.int8).to(torch.float32)
    dl = (d * sc).view(n, 16, 1)
    ql = _shift_out(blocks[:, 0:128].reshape(n, 2, 64), (0, 4), 0x0F).reshape(n, 8, 32)
    qh = _shift_out(blocks[:, 128:192].reshape(n, 2, 32), (0, 2, 4, 6), 0x03).reshape(n, 8, 32)
    q = (ql | (qh << 4)).to(torch.int8) - 32
    return (dl * q.view(n, 16, 16).to(torch.float32)).reshape(n, QK_K)


def dequant_q2_k(blocks: torch.Tensor) -> torch.Tensor:
    """Q2_K (scales[16], qs[64], d, dmin): w = d * (sc_j & 15) * q - dmin * (sc_j >> 4), 16 per j."""
    n = blocks.shape[0]
    scales = blocks[:, 0:16]
    d, dmin = f16_at(blocks, 80), f16_at(blocks, 82)
    dl = (d * (scales & 0x0F).to(torch.float32)).view(n, 16, 1)
    ml = (dmin * (scales >> 4).to(torch.float32)).view(n, 16, 1)
    q = _shift_out(blocks[:, 16:80].reshape(n, 2, 32), (0, 2, 4, 6), 0x03).reshape(n, 16, 16)
    return (dl * q.to(torch.float32) - ml).reshape(n, QK_K)


def _q3_k_scales(scales: torch.Tensor) -> torch.Tensor:
    """Q3_K's 12 bytes -> sixteen signed 6-bit scales (n, 16) float32.

    Low 4 bits: bytes 0-7, low nibbles are scales 0-7, high nibbles scales 8-15. High 2 bits:
    bytes 8-11, bit pair k of byte i belongs to scale 4k + i.
    """
    n = scales.shape[0]
    lo = torch.cat([scales[:, 0:8] & 0x0F, scales[:, 0:8] >> 4], dim=-1)
    hi = _shift_out(scales[:, 8:12].reshape(n, 1, 4), (0, 2, 4, 6), 0x03).reshape(n, 16)
    return ((lo | (hi << 4)).to(torch.int8) - 32).to(torch.float32)


def dequant_q3_k(blocks: torch.Tensor) -> torch.Tensor:
    """Q3_K (hmask[32], qs[64], scales[12], d): w = d * sc_j * (q2 - 4 * (1 - hbit)), 16 per j."""
    n = blocks.shape[0]
    d = f16_at(blocks, 108)
    dl = (d * _q3_k_scales(blocks[:, 96:108])).view(n, 16, 1)
    ql = _shift_out(blocks[:, 32:96].reshape(n, 2, 32), (0, 2, 4, 6), 0x03).reshape(n, 16, 16)
    qh = _shift_out(blocks[:, 0:32].reshape(n, 1, 32), tuple(range(8)), 1).reshape(n, 16, 16)
    q = ql.to(torch.int8) - ((qh ^ 1) << 2).to(torch.int8)  # a set hmask bit means no offset
    return (dl * q.to(torch.float32)).reshape(n, QK_K)


def dequant_iq4_xs(blocks: torch.Tensor) -> torch.Tensor:
    """IQ4_XS (d, scales_h u16, scales_l[4], qs[128]): w = d * (sc_j - 32) * kvalues[q], 32 per j."""
    n = blocks.shape[0]
    d = f16_at(blocks, 0)
    lo = torch.stack([blocks[:, 4:8] & 0x0F, blocks[:, 4:8] >> 4], dim=-1).reshape(n, 8)
    hi = bits_le(blocks[:, 2:4]).view(n, 8, 2)  # 2-bit fields: bit pair j of the u16
    hi = hi[..., 0] | (hi[..., 1] << 1)
    sc = ((lo | (hi << 4)).to(torch.int8) - 32).to(torch.float32)
    dl = (d * sc).view(n, 8, 1)
    qs = blocks[:, 8:136].reshape(n, 8, 16)
    q = torch.cat([qs & 0x0F, qs >> 4], dim=-1)  # (n, 8, 32)
    return (dl * kvalue_lookup(q)).reshape(n, QK_K)
