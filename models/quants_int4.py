"""GGUF formats -> torch's int4 group-32 form: w = (q - 8) * scale + zero, q in 0..15.

That is the convention of `_weight_int4pack_mm(_for_cpu)` (checked against the op itself in
tests/models/test_quants_repack.py), with scales and zeros stored per (group, output row).

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
Finally scale and zero are rounded to the storage dtype (bf16 by default) and q is re-chosen as
the nearest level of the rounded grid, which undoes most of that rounding's effect on w.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from gguf import GGMLQuantizationType

from ember.models import quants_k as k
from ember.models import quants_legacy as legacy

GROUP_SIZE = 32
FIT_ITERATIONS = 6

T = GGMLQuantizationType
AffineFn = Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor, torch.Tensor]]

# Formats whose groups of 32 are exactly q * a + b with q in 0..15.
EXACT_AFFINE: dict[GGMLQuantizationType, AffineFn] = {
    T.Q4_0: legacy.affine_q4_0,
    T.Q4_1: legacy.affine_q4_1,
    T.Q4_K: k.affine_q4_k,
}


def exact_groups(
    qtype: GGMLQuantizationType, blocks: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """uint8 blocks -> (w (G, 32) float32, a (G, 1), b (G, 1)) with w = q a + b exactly."""
    q, a, b = EXACT_AFFINE[qtype](blocks)
    q32 = q.reshape(-1, GROUP_SIZE).to(torch.float32)
    a, b = a.reshape(-1, 1), b.reshape(-1, 1)
    return a * q32 + b, a, b


def _nearest_q(w: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Nearest level index 0..15 of the grid b + q a for each w (q = 0 where a == 0)."""
    safe = torch.where(a == 0, torch.ones_like(a), a)
    q = torch.round((w - b) / safe).clamp_(0, 15)
    return torch.where(a == 0, torch.zeros_like(q), q)


def fit_affine(
    w: torch.Tensor, iterations: int = FIT_ITERATIONS
) -> tuple[torch.Tensor, torch.Tensor]:
    """Least-squares affine 4-bit grid per row of w (G, 32): (a (G, 1), b (G, 1))."""
    lo = w.amin(dim=-1, keepdim=True)
    hi = w.amax(dim=-1, keepdim=True)
    a, b = (hi - lo) / 15.0, lo  # min-max start
    w_mean = w.mean(dim=-1, keepdim=True)
    for _ in range(iterations):
        q = _nearest_q(w, a, b)
        q_centered = q - q.mean(dim=-1, keepdim=True)
        var = (q_centered * q_centered).sum(dim=-1, keepdim=True)
        cov = (q_centered * (w - w_mean)).sum(dim=-1, keepdim=True)
        # For fixed q: a = cov(q, w) / var(q), b = mean(w) - a mean(q); a constant q keeps a.
        a = torch.where(var > 0, cov / torch.where(var > 0, var, 1.0), a)
        b = w_mean - a * q.mean(dim=-1, keepdim=True)
    return a, b


def to_int4(
    w: torch.Tensor, a: torch.Tensor, b: torch.Tensor, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Groups w (G, 32) on grid (a, b) -> (q (G, 32) int32 0..15, scale (G,), zero (G,) in dtype)."""
    scale = a.to(dtype)
    zero = (b + 8.0 * a).to(dtype)
    s, z = scale.to(torch.float32), zero.to(torch.float32)
    # Re-pick q on the rounded grid z + (q - 8) s, i.e. b' = z - 8 s.
    q = _nearest_q(w, s, z - 8.0 * s)
    q = torch.where(s == 0, torch.full_like(q, 8.0), q)
    return q.to(torch.int32), scale.reshape(-1), zero.reshape(-1)


def int4_groups(
    qtype: GGMLQuantizationType,
    blocks: torch.Tensor,
    dequant: Callable[[torch.Tensor], torch.Tensor],
    dtype: torch.dtype,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Blocks of whole rows -> int4 (q (G, 32), scale (G,), zero (G,)), exact where possible."""
    if qtype in EXACT_AFFINE:
        w, a, b = exact_groups(qtype, blocks)
    else:
        w = dequant(blocks).reshape(-1, GROUP_SIZE)
        a, b = fit_affine(w)
    return to_int4(w, a, b, dtype)


def dequant_int4(q: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor) -> torch.Tensor:
    """The weights an int4 group form stands for: (q - 8) * scale + zero, float32 (G, 32)."""
    s = scale.to(torch.float32).reshape(-1, 1)
    z = zero.to(torch.float32).reshape(-1, 1)
    return (q.to(torch.float32) - 8.0) * s + z
