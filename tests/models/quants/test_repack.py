"""Repacking into torch's int4 / int8 / bf16 forms, and the matmul on them.

Error bounds (bf16 has an 8-bit significand: rounding moves a value by at most U = 2^-8 of it):
  * exact int4 (Q4_0, Q4_1, Q4_K): only scale and zero are rounded, so per weight
    |w' - w| <= U (8 |scale| + |zero|)   [(q - 8) s + z with |q - 8| <= 8; re-picking q only helps]
  * int8 (per output row n): q = round(w / s_n) with the rounded s_n, so |w' - w| <= s_n / 2
  * bf16: |w' - w| <= U |w|
  * lossy int4 (every other format): no per-weight bound; the least-squares grid must do no
    worse than plain min-max rounding on the same groups.
  The matmul adds the activation's bf16 rounding and the output's: with W' the packed weights,
    |y - y_ref| <= U |y'| + U (|x| @ |W'|^T) + |x| @ B^T,   B the per-weight bound above,
  where y' = bf16(x) @ W'^T in float32 (the kernels accumulate in float32: checked separately).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType
from gguf import quants as gguf_quants

from ember.models.errors import ModelFileError
from ember.models.files.gguf import open_gguf
from ember.models.quants import dequant as quants
from ember.models.quants.dequant import dequantize
from ember.models.quants.int4pack import pack_int4
from ember.models.quants.repack import (
    PackedWeight,
    auto_target,
    matmul,
    packed_to_float,
    repack,
)
from tests.models.quants.quant_blocks import one_torch_thread, random_tensor

__all__ = ["one_torch_thread"]  # the autouse fixture applies to this module

T = GGMLQuantizationType
U = 2.0**-8
SLACK = 1.0 + 2.0**-6  # float32 arithmetic in the bound's own terms
EXACT_INT4 = [T.Q4_0, T.Q4_1, T.Q4_K]
LOSSY_INT4 = [T.IQ4_NL, T.IQ4_XS, T.Q5_0, T.Q5_1, T.Q5_K, T.Q6_K, T.Q8_0, T.Q2_K, T.Q3_K]
INT8 = [T.Q5_0, T.Q5_1, T.Q5_K, T.Q6_K, T.Q8_0, T.Q4_K, T.Q4_0]
BF16 = [T.F32, T.F16, T.BF16, T.Q4_K, T.Q8_0]


def _weights(qtype: GGMLQuantizationType, rows: int = 48, cols: int = 512):
    """(raw bytes, exact float32 weights) of a random tensor of this type."""
    raw = random_tensor(qtype, rows, cols, seed=int(qtype) + 11)
    return raw, dequantize(raw, qtype, (rows, cols))


def _group_scale_zero(packed: PackedWeight) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-weight (scale, zero) float32 (N, K) of an int4 PackedWeight."""
    assert packed.scales_and_zeros is not None
    sz = packed.scales_and_zeros.to(torch.float32)[:, : packed.out_features]  # (K/32, N, 2)
    s = sz[..., 0].T.repeat_interleave(packed.group_size, dim=1)
    z = sz[..., 1].T.repeat_interleave(packed.group_size, dim=1)
    return s, z


def _weight_bound(packed: PackedWeight, w: torch.Tensor) -> torch.Tensor:
    """B: the per-weight error bound of an exact mapping (see the module docstring)."""
    if packed.kind == "int4":
        s, z = _group_scale_zero(packed)
        return U * (8 * s.abs() + z.abs()) * SLACK
    if packed.kind == "int8":
        assert packed.scales is not None
        return (packed.scales.to(torch.float32) / 2 * SLACK).unsqueeze(1).expand_as(w)
    return U * w.abs() * SLACK


def _check_matmul(
    packed: PackedWeight, w: torch.Tensor, weight_bound: torch.Tensor, output_roundings: int = 1
) -> None:
    x = torch.randn(5, w.shape[1], generator=torch.Generator().manual_seed(0))
    w_packed = packed_to_float(packed)
    y = matmul(x, packed)
    assert y.dtype == torch.float32 and tuple(y.shape) == (5, w.shape[0])
    y_ref = x @ w.T
    y_packed = x.to(torch.bfloat16).to(torch.float32) @ w_packed.T
    # int4x2 rounds each part's output to bf16, then their sum: bounded by U per |x| |W'| term.
    out_terms = U * y_packed.abs() + (output_roundings - 1) * U * (x.abs() @ w_packed.abs().T)
    bound = out_terms + U * (x.abs() @ w_packed.abs().T) + x.abs() @ weight_bound.T
    excess = (y - y_ref).abs() - bound * SLACK
    assert excess.max() <= 0, f"matmul error exceeds its bound by {excess.max():.3g}"


def test_int4_convention_is_q_minus_8_times_scale_plus_zero() -> None:
    # The layout and meaning we rely on, checked against the installed torch's own op.
    gen = torch.Generator().manual_seed(1)
    n, k = 32, 128
    q = torch.randint(0, 16, (n, k), dtype=torch.int32, generator=gen)
    scale = torch.rand(k // 32, n, generator=gen) + 0.5
    zero = torch.randn(k // 32, n, generator=gen)
    weight = pack_int4(q, torch.device("cpu"))
    packed = PackedWeight("int4", n, k, weight, torch.stack([scale, zero], -1))
    expected = (q - 8) * scale.T.repeat_interleave(32, 1) + zero.T.repeat_interleave(32, 1)
    torch.testing.assert_close(packed_to_float(packed), expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize("qtype", EXACT_INT4, ids=lambda t: t.name)
def test_exact_int4_formats_map_up_to_bf16_rounding(qtype: GGMLQuantizationType) -> None:
    raw, w = _weights(qtype)
    packed = repack(raw, qtype, tuple(w.shape), "int4")
    assert packed.kind == "int4" and packed.scales_and_zeros is not None
    assert packed.scales_and_zeros.dtype == torch.bfloat16
    bound = _weight_bound(packed, w)
    assert ((packed_to_float(packed) - w).abs() <= bound).all()
    _check_matmul(packed, w, bound)


def test_q4_0_from_real_quantizer_keeps_zero_points_at_zero() -> None:
    # Q4_0 is (q - 8) d: scale d, zero exactly 0, so only d's bf16 rounding remains.
    w = np.random.default_rng(5).standard_normal((32, 256)).astype(np.float32)
    raw = gguf_quants.quantize(w, T.Q4_0)
    packed = repack(raw, T.Q4_0, (32, 256), "int4")
    assert packed.scales_and_zeros is not None
    assert (packed.scales_and_zeros[..., 1] == 0).all()
    exact = dequantize(raw, T.Q4_0, (32, 256))
    rel = (packed_to_float(packed) - exact).abs() / exact.abs().clamp_min(1e-30)
    assert rel.max() <= U


@pytest.mark.parametrize("qtype", INT8, ids=lambda t: t.name)
def test_int8_rounds_each_weight_to_its_row_grid(qtype: GGMLQuantizationType) -> None:
    raw, w = _weights(qtype)
    packed = repack(raw, qtype, tuple(w.shape), "int8")
    assert packed.weight.dtype == torch.int8 and packed.scales is not None
    bound = _weight_bound(packed, w)
    assert ((packed_to_float(packed) - w).abs() <= bound).all()
    _check_matmul(packed, w, bound)


@pytest.mark.parametrize("qtype", BF16, ids=lambda t: t.name)
def test_bf16_rounds_each_weight(qtype: GGMLQuantizationType) -> None:
    raw, w = _weights(qtype)
    packed = repack(raw, qtype, tuple(w.shape), "bf16")
    bound = _weight_bound(packed, w)
    assert ((packed_to_float(packed) - w).abs() <= bound).all()
    _check_matmul(packed, w, bound)


def _min_max_rtn_error(w: torch.Tensor) -> float:
    """Squared error of plain min-max int4 rounding per group of 32 on a bf16 grid."""
    from ember.models.quants.int4 import dequant_int4, to_int4

    g = w.reshape(-1, 32)
    lo, hi = g.amin(1, keepdim=True), g.amax(1, keepdim=True)
    q, s, z = to_int4(g, (hi - lo) / 15, lo, torch.bfloat16)
    return float(((dequant_int4(q, s, z) - g) ** 2).sum())


@pytest.mark.parametrize("qtype", LOSSY_INT4, ids=lambda t: t.name)
def test_lossy_int4_fit_beats_min_max_rounding(qtype: GGMLQuantizationType) -> None:
    raw, w = _weights(qtype)
    packed = repack(raw, qtype, tuple(w.shape), "int4")
    w_packed = packed_to_float(packed)
    fit_error = float(((w_packed - w) ** 2).sum())
    assert fit_error <= _min_max_rtn_error(w)
    # The matmul's extra error is the activation and output rounding only.
    _check_matmul(packed, w, (w_packed - w).abs())


@pytest.mark.parametrize("qtype", [T.Q5_0, T.Q8_0], ids=lambda t: t.name)
def test_int4x2_is_exact_up_to_the_scale_rounding(qtype: GGMLQuantizationType) -> None:
    # w = d q split into 16 d h + d l: both parts share bf16(d), so w' = bf16(d) q exactly.
    raw, w = _weights(qtype)
    packed = repack(raw, qtype, tuple(w.shape), "int4x2")
    assert packed.kind == "int4x2" and packed.residual is not None
    bound = U * w.abs()
    assert ((packed_to_float(packed) - w).abs() <= bound).all()
    _check_matmul(packed, w, bound, output_roundings=2)


@pytest.mark.parametrize("qtype", [T.Q5_1, T.Q5_K], ids=lambda t: t.name)
def test_int4x2_with_mins_is_exact_up_to_scale_and_zero_rounding(
    qtype: GGMLQuantizationType,
) -> None:
    # w = a (16 h + l) + b: the error is (16 h + l - 8)(a' - a) + (z' - z) with 16 h + l - 8 in
    # -8..23, so |w' - w| <= U (23 |a| + |z|), a and z the low part's scale and zero.
    raw, w = _weights(qtype)
    packed = repack(raw, qtype, tuple(w.shape), "int4x2")
    assert packed.residual is not None
    s, z = _group_scale_zero(packed.residual)
    bound = U * (23 * s.abs() + z.abs()) * SLACK
    assert ((packed_to_float(packed) - w).abs() <= bound).all()
    _check_matmul(packed, w, bound, output_roundings=2)


@pytest.mark.parametrize("qtype", [T.Q6_K, T.IQ4_NL, T.Q3_K], ids=lambda t: t.name)
def test_int4x2_residual_fit_beats_one_int4_part(qtype: GGMLQuantizationType) -> None:
    # A second 4-bit grid fitted to the first one's residual: each part's fit is at least as
    # good as min-max rounding, so the residual error shrinks by roughly 15x per group.
    raw, w = _weights(qtype)
    two = packed_to_float(repack(raw, qtype, tuple(w.shape), "int4x2"))
    one = packed_to_float(repack(raw, qtype, tuple(w.shape), "int4"))
    assert float(((two - w) ** 2).sum()) <= float(((one - w) ** 2).sum()) / 16


def test_auto_targets_follow_the_design() -> None:
    assert {auto_target(t) for t in (T.Q4_0, T.Q4_1, T.Q4_K, T.IQ4_NL, T.IQ4_XS)} == {"int4"}
    assert {auto_target(t) for t in (T.Q5_0, T.Q5_1, T.Q5_K, T.Q6_K, T.Q8_0)} == {"int8"}
    assert {auto_target(t) for t in (T.F32, T.F16, T.BF16)} == {"bf16"}
    with pytest.raises(ModelFileError, match="IQ2_XS"):
        auto_target(T.IQ2_XS)


def test_rows_not_a_multiple_of_16_are_padded_away() -> None:
    raw, w = _weights(T.Q4_0, rows=40, cols=256)
    packed = repack(raw, T.Q4_0, (40, 256))
    assert packed.out_features == 40
    x = torch.randn(3, 256)
    assert tuple(matmul(x, packed).shape) == (3, 40)
    assert tuple(packed_to_float(packed).shape) == (40, 256)
    _check_matmul(packed, w, _weight_bound(packed, w))


def test_chunked_repack_equals_one_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    raw, w = _weights(T.Q4_K, rows=200, cols=256)
    whole = repack(raw, T.Q4_K, (200, 256))
    monkeypatch.setattr(quants, "CHUNK_ELEMENTS", 64 * 256)  # 64 rows per chunk
    chunked = repack(raw, T.Q4_K, (200, 256))
    assert torch.equal(whole.weight, chunked.weight)
    assert whole.scales_and_zeros is not None and chunked.scales_and_zeros is not None
    assert torch.equal(whole.scales_and_zeros, chunked.scales_and_zeros)
    int8_whole = repack(raw, T.Q4_K, (200, 256), "int8")
    monkeypatch.setattr(quants, "CHUNK_ELEMENTS", 1 << 20)
    assert torch.equal(repack(raw, T.Q4_K, (200, 256), "int8").weight, int8_whole.weight)


def test_matmul_keeps_leading_dims_and_dtype() -> None:
    raw, _ = _weights(T.Q8_0, rows=32, cols=128)
    for target in ("int4", "int4x2", "int8", "bf16"):
        packed = repack(raw, T.Q8_0, (32, 128), target)
        x = torch.randn(2, 3, 128, dtype=torch.bfloat16)
        y = matmul(x, packed)
        assert y.dtype == torch.bfloat16 and tuple(y.shape) == (2, 3, 32)


def test_float32_scales_make_exact_formats_exact() -> None:
    raw, w = _weights(T.Q4_K, rows=32, cols=256)
    packed = repack(raw, T.Q4_K, (32, 256), "int4", dtype=torch.float32)
    err = (packed_to_float(packed) - w).abs()
    assert err.max() <= 1e-6 * w.abs().max()


def test_torch_float_tensors_repack_like_their_bytes() -> None:
    # safetensors weights quantized on load: pass the tensor itself with its float type.
    w = torch.randn(32, 256, dtype=torch.bfloat16, generator=torch.Generator().manual_seed(4))
    from_tensor = repack(w, T.BF16, (32, 256), "int4")
    from_bytes = repack(w.view(torch.uint8).numpy(), T.BF16, (32, 256), "int4")
    assert torch.equal(from_tensor.weight, from_bytes.weight)
    assert torch.equal(packed_to_float(repack(w, T.BF16, (32, 256), "bf16")), w.float())


def test_bad_requests_are_model_file_errors() -> None:
    raw, _ = _weights(T.Q4_0, rows=16, cols=64)
    with pytest.raises(ModelFileError, match="2-D"):
        repack(raw, T.Q4_0, (4, 4, 64))  # type: ignore[arg-type]  # 3-D on purpose: refused
    with pytest.raises(ModelFileError, match="unknown repack target"):
        repack(raw, T.Q4_0, (16, 64), "int2")  # type: ignore[arg-type]
    f32 = random_tensor(T.F32, 16, 48)
    with pytest.raises(ModelFileError, match="divisible by 32"):
        repack(f32, T.F32, (16, 48), "int4")


@pytest.mark.model
def test_real_tensors_auto_repack_within_bounds(starter_gguf) -> None:
    tensors = open_gguf(starter_gguf).tensors
    for name in ("blk.0.attn_output.weight", "blk.0.attn_q.weight", "blk.0.attn_v.weight",
                 "blk.0.ffn_down.weight"):  # fmt: skip  # Q4_K, Q5_0, Q8_0, Q6_K
        t = tensors[name]
        rows = 64  # the first 64 output rows keep the float32 reconstruction cheap
        raw = t.data[:rows]  # (rows, bytes per row) uint8 view
        shape = (rows, t.shape[1])
        w = dequantize(raw, t.qtype, shape)
        packed = repack(raw, t.qtype, shape)
        assert packed.kind == auto_target(t.qtype)
        bound = _weight_bound(packed, w)
        assert ((packed_to_float(packed) - w).abs() <= bound).all(), name
        _check_matmul(packed, w, bound)
