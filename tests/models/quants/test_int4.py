"""The int4 group-32 math the torch runner's converter reads its codes from (models/quants/int4).

Bounds (bf16 has an 8-bit significand: rounding moves a value by at most U = 2^-8 of it):
  * the affine forms of Q4_0 / Q4_1 / Q4_K are the formats' own values: q a + b == dequantize
  * int4x2 of Q5_0 / Q8_0: w = a u split into 16 a h + a l; both parts share bf16(a), so
    |w' - w| <= U |w|; with mins (Q5_1, Q5_K) |w' - w| <= U (23 |a| + |z|)
  * fitted grids: no per-weight bound; least squares must beat plain min-max rounding, and a
    second grid fitted to the residual must shrink the error by about 15x
"""

from __future__ import annotations

import pytest
import torch
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

from ember.models.quants.dequant import DEQUANTIZERS, dequantize
from ember.models.quants.int4 import (
    EXACT_AFFINE,
    GROUP_SIZE,
    dequant_int4,
    fit_affine,
    int4x2_groups,
    to_int4,
)
from tests.models.quants.quant_blocks import one_torch_thread, random_tensor

__all__ = ["one_torch_thread"]  # the autouse fixture applies to this module

T = GGMLQuantizationType
U = 2.0**-8
SLACK = 1.0 + 2.0**-6  # float32 arithmetic in the bound's own terms


def _blocks(qtype: GGMLQuantizationType, rows: int = 48, cols: int = 512):
    """(uint8 blocks (n, block bytes), exact float32 weights (rows, cols)) of random data."""
    raw = random_tensor(qtype, rows, cols, seed=int(qtype) + 11)
    blocks = torch.from_numpy(raw.reshape(-1, GGML_QUANT_SIZES[qtype][1]).copy())
    return blocks, dequantize(raw, qtype, (rows, cols))


@pytest.mark.parametrize("qtype", sorted(EXACT_AFFINE), ids=lambda t: t.name)
def test_affine_forms_are_the_formats_own_values(qtype: GGMLQuantizationType) -> None:
    blocks, w = _blocks(qtype)
    q, a, b = EXACT_AFFINE[qtype](blocks)
    assert int(q.min()) >= 0 and int(q.max()) <= 15
    groups = q.reshape(-1, GROUP_SIZE).float() * a.reshape(-1, 1) + b.reshape(-1, 1)
    torch.testing.assert_close(groups.reshape(w.shape), w, rtol=0, atol=1e-7 * float(w.abs().max()))


def _min_max_error(w: torch.Tensor) -> float:
    """Squared error of plain min-max int4 rounding per group of 32 on a bf16 grid."""
    g = w.reshape(-1, GROUP_SIZE)
    lo, hi = g.amin(1, keepdim=True), g.amax(1, keepdim=True)
    return float(((dequant_int4(*to_int4(g, (hi - lo) / 15, lo, torch.bfloat16)) - g) ** 2).sum())


@pytest.mark.parametrize(
    "qtype", [T.IQ4_NL, T.Q5_0, T.Q6_K, T.Q8_0, T.Q2_K, T.Q3_K], ids=lambda t: t.name
)
def test_least_squares_grid_beats_min_max_rounding(qtype: GGMLQuantizationType) -> None:
    _, w = _blocks(qtype)
    g = w.reshape(-1, GROUP_SIZE)
    fitted = dequant_int4(*to_int4(g, *fit_affine(g), torch.bfloat16))
    assert float(((fitted - g) ** 2).sum()) <= _min_max_error(w)


def _int4x2(qtype: GGMLQuantizationType) -> tuple[torch.Tensor, torch.Tensor, tuple, tuple]:
    blocks, w = _blocks(qtype)
    hi, lo = int4x2_groups(qtype, blocks, DEQUANTIZERS[qtype], torch.bfloat16)
    both = (dequant_int4(*hi) + dequant_int4(*lo)).reshape(w.shape)
    return both, w, hi, lo


@pytest.mark.parametrize("qtype", [T.Q5_0, T.Q8_0], ids=lambda t: t.name)
def test_int4x2_is_exact_up_to_the_scale_rounding(qtype: GGMLQuantizationType) -> None:
    both, w, _, _ = _int4x2(qtype)
    assert ((both - w).abs() <= U * w.abs() * SLACK).all()


@pytest.mark.parametrize("qtype", [T.Q5_1, T.Q5_K], ids=lambda t: t.name)
def test_int4x2_with_mins_is_exact_up_to_scale_and_zero_rounding(
    qtype: GGMLQuantizationType,
) -> None:
    # w = a (16 h + l) + b: the error is (16 h + l - 8)(a' - a) + (z' - z), 16 h + l - 8 in -8..23
    both, w, _, (_, scale, zero) = _int4x2(qtype)
    s = scale.float().abs().reshape(-1, 1).expand(-1, GROUP_SIZE).reshape(w.shape)
    z = zero.float().abs().reshape(-1, 1).expand(-1, GROUP_SIZE).reshape(w.shape)
    assert ((both - w).abs() <= U * (23 * s + z) * SLACK).all()


@pytest.mark.parametrize("qtype", [T.Q6_K, T.IQ4_NL, T.Q3_K], ids=lambda t: t.name)
def test_int4x2_residual_fit_beats_one_grid(qtype: GGMLQuantizationType) -> None:
    both, w, hi, _ = _int4x2(qtype)
    one = dequant_int4(*hi).reshape(w.shape)
    assert float(((both - w) ** 2).sum()) <= float(((one - w) ** 2).sum()) / 16
