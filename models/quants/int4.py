"""GGUF formats -> int4 group-32 math: w = (q - 8) * scale + zero, q in 0..15, per group of 32.

That is the convention of `_weight_int4pack_mm(_for_cpu)` (checked against the op itself in
tests/engine/runners/torch/test_pack.py). The torch runner's converter
(engine/runners/torch/layers/quantize.py) reads codes from here:
    EXACT_AFFINE[qtype](blocks) -> (q, a, b)        Q4_0 / Q4_1 / Q4_K groups, exactly
    fit_affine(w) -> (a, b)                          least-squares 4-bit grid per group
    int4x2_groups(qtype, blocks, dequant, dtype)     two int4 parts summing to a 5/8-bit weight
    to_int4, dequant_int4                            a grid's codes, and back to float

Each source group of 32 weights is first written in an affine form w = q * a + b:
  * exact for the GGUF 4-bit formats whose groups are affine with 32 elements:
      Q4_0: w = (q - 8) d                 -> a = d,        b = -8 d
      Q4_1: w = q d + m                   -> a = d,        b = m
      Q4_K: w = q (d sc_j) - dmin m_j     -> a = d sc_j,   b = -dmin m_j   (sub-block j of 32)
    and then scale = a, zero = b + 8 a, since (q - 8) a + b + 8 a = q a + b.
  * fitted for every other format (IQ4_NL/IQ4_XS's non-linear codebook, Q2_K/Q3_K's two
    16-element sub-blocks per group, 5/6/8-bit values): least squares over the group,
    alternating q = round((w - b) / a) clamped to 0..15 with the closed-form (a, b) for fixed q.
    Each half-step minimizes the squared error for the other fixed, so it never gets worse.
Finally scale and zero are rounded to the storage dtype (bf16 by default). Exact formats keep
their own q (one cheap pass: this runs at model load); fitted ones re-pick q as the nearest
level of the rounded grid.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from gguf import GGMLQuantizationType

from ember.models.quants import k_quants as k
from ember.models.quants import legacy
from ember.models.quants.mxfp4 import affine_mxfp4

GROUP_SIZE = 32
FIT_ITERATIONS = 3  # the squared error is within 1% of its limit after 3 (measured)

T = GGMLQuantizationType
Int4Part = tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # (q (G, 32) int32, scale, zero)
AffineFn = Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor, torch.Tensor]]

# Formats whose groups of 32 are exactly q * a + b with q in 0..15.
EXACT_AFFINE: dict[GGMLQuantizationType, AffineFn] = {
    T.Q4_0: legacy.affine_q4_0,
    T.Q4_1: legacy.affine_q4_1,
    T.Q4_K: k.affine_q4_k,
}


def _nearest_q(w: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Nearest level index 0..15 of the grid b + q a for each w (q = 0 where a == 0)."""
    inv = torch.where(a == 0, 0.0, 1.0 / torch.where(a == 0, 1.0, a))  # (G, 1): cheap
    return ((w - b) * inv).round_().clamp_(0, 15)


def fit_affine(
    w: torch.Tensor, iterations: int = FIT_ITERATIONS
) -> tuple[torch.Tensor, torch.Tensor]:
    """Least-squares affine 4-bit grid per row of w (G, 32): (a (G, 1), b (G, 1))."""
    lo, hi = w.amin(dim=-1, keepdim=True), w.amax(dim=-1, keepdim=True)
    a, b = (hi - lo) / 15.0, lo  # min-max start
    n = w.shape[-1]
    w_mean = w.mean(dim=-1, keepdim=True)
    w_centered = w - w_mean
    for _ in range(iterations):
        q = _nearest_q(w, a, b)
        q_sum = q.sum(dim=-1, keepdim=True)
        # For fixed q: a = cov(q, w) / var(q), b = mean(w) - a mean(q); a constant q keeps a.
        # Sums of q and q^2 are small integers, exact in float32.
        var = (q * q).sum(dim=-1, keepdim=True) - q_sum * q_sum / n
        cov = (q * w_centered).sum(dim=-1, keepdim=True)
        a = torch.where(var > 0, cov / torch.where(var > 0, var, 1.0), a)
        b = w_mean - a * (q_sum / n)
    return a, b


def to_int4(w: torch.Tensor, a: torch.Tensor, b: torch.Tensor, dtype: torch.dtype) -> Int4Part:
    """Groups w (G, 32) on grid (a, b) -> (q (G, 32) int32 0..15, scale (G,), zero (G,) in dtype)."""
    scale = a.to(dtype)
    zero = (b + 8.0 * a).to(dtype)
    s, z = scale.to(torch.float32), zero.to(torch.float32)
    # Re-pick q on the rounded grid z + (q - 8) s, i.e. b' = z - 8 s (s == 0: every q gives z).
    q = _nearest_q(w, s, z - 8.0 * s)
    return q.to(torch.int32), scale.reshape(-1), zero.reshape(-1)


# int4x2: two int4 weights whose sum is the 5/8-bit weight, w = a u + b with u = 16 h + l:
#   hi: q = h + c, scale 16 a, zero 0     -> 16 a h + 16 a (c - 8)
#   lo: q = l,     scale a,    zero z_lo  -> a l - 8 a + z_lo,  z_lo = b - 16 a (c - 8) + 8 a
# c keeps z_lo a small exact multiple of a where b is one: Q5_0 (b = -16 a, c = 8): z_lo = -8 a;
# Q8_0 (b = -128 a, c = 0): z_lo = 8 a. So in bf16 only a's rounding remains: w' = bf16(a) q.
# MXFP4 (u = kvalue + 12 in 0..24, b = -12 a, c = 8): z_lo = -4 a, and a is a power of two, so
# nothing rounds at all.
EXACT_WIDE: dict[GGMLQuantizationType, tuple[AffineFn, int]] = {
    T.Q5_0: (legacy.affine_q5_0, 8),
    T.Q5_1: (legacy.affine_q5_1, 8),
    T.Q5_K: (k.affine_q5_k, 8),
    T.Q8_0: (legacy.affine_q8_0, 0),
    T.MXFP4: (affine_mxfp4, 8),
}


def int4x2_groups(
    qtype: GGMLQuantizationType,
    blocks: torch.Tensor,
    dequant: Callable[[torch.Tensor], torch.Tensor],
    dtype: torch.dtype,
) -> tuple[Int4Part, Int4Part]:
    """Blocks -> (hi, lo) int4 parts with w = hi + lo: exact for EXACT_WIDE, else a residual fit."""
    if qtype not in EXACT_WIDE:
        # Lossy: fit w, then fit what the first grid missed.
        w = dequant(blocks).reshape(-1, GROUP_SIZE)
        hi = to_int4(w, *fit_affine(w), dtype)
        residual = w - dequant_int4(*hi)
        return hi, to_int4(residual, *fit_affine(residual), dtype)
    affine, c = EXACT_WIDE[qtype]
    u, a, b = affine(blocks)
    u = u.reshape(-1, GROUP_SIZE).to(torch.int32)
    a, b = a.reshape(-1), b.reshape(-1)
    hi = ((u >> 4) + c, (16.0 * a).to(dtype), torch.zeros_like(a, dtype=dtype))
    lo = (u & 15, a.to(dtype), (b - 16.0 * (c - 8) * a + 8.0 * a).to(dtype))
    return hi, lo


def dequant_int4(q: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor) -> torch.Tensor:
    """The weights an int4 group form stands for: (q - 8) * scale + zero, float32 (G, 32)."""
    s = scale.to(torch.float32).reshape(-1, 1)
    z = zero.to(torch.float32).reshape(-1, 1)
    return (q.to(torch.float32) - 8.0) * s + z
