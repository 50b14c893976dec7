"""The native kernels against the reference dequantizers: rows bit-identical, products exact up
to the 8-bit rounding of the activations (which the reference applies the same way)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType

from ember.engine.runners.torch.native.kernels import Kernels, make_linear, mat_of
from ember.models.quants.dequant import dequantize
from tests.models.quants.quant_blocks import random_tensor

T = GGMLQuantizationType
TYPES = (T.F32, T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q4_K, T.Q5_K, T.Q6_K)
K_QUANTS = (T.Q4_K, T.Q5_K, T.Q6_K)
FLOATS = (T.F32, T.F16, T.BF16)


def reference_weights(raw: np.ndarray, qtype: T, rows: int, cols: int) -> torch.Tensor:
    if qtype == T.BF16:  # models.quants.dequant reads bf16 through its own path
        bits = raw.reshape(-1).view(np.uint16).astype(np.uint32) << 16
        return torch.from_numpy(bits.view(np.float32).reshape(rows, cols).copy())
    return dequantize(raw.reshape(-1), qtype, (rows, cols))


def rounded_activations(x: torch.Tensor, qtype: T) -> torch.Tensor:
    """x as the kernels see it: q8_0 (32-blocks, half-precision scale) or q8_K (256-blocks)."""
    if qtype in FLOATS:
        return x
    block = 256 if qtype in K_QUANTS else 32
    xb = x.reshape(-1, block)
    amax = xb.abs().amax(1, keepdim=True)
    d = amax / 127
    q = torch.round(xb * torch.where(amax > 0, 127 / amax, torch.zeros_like(amax))).clamp(-127, 127)
    if qtype not in K_QUANTS:
        d = d.half().float()
    return (q * d).reshape(x.shape)


@pytest.mark.parametrize("qtype", TYPES, ids=lambda t: t.name)
def test_rows_bit_identical_to_reference(kernels: Kernels, qtype: T) -> None:
    rows, cols = 24, 512
    raw = random_tensor(qtype, rows, cols, seed=int(qtype))
    lin = make_linear([(raw, int(qtype), (rows, cols))])
    expected = reference_weights(raw, qtype, rows, cols)
    assert torch.equal(kernels.dequantize(lin), expected)
    ids = torch.tensor([5, 0, 23, 5])
    got = kernels.gather(mat_of(raw, int(qtype), (rows, cols)), ids, scale=2.0)
    assert torch.equal(got, expected[ids] * 2.0)


@pytest.mark.parametrize("qtype", TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("m", [1, 3])
def test_product_exact_up_to_activation_rounding(kernels: Kernels, qtype: T, m: int) -> None:
    rows, cols = 40, 768
    raw = random_tensor(qtype, rows, cols, seed=int(qtype) + 1)
    w = reference_weights(raw, qtype, rows, cols).double()
    x = torch.randn(m, cols, generator=torch.Generator().manual_seed(m))
    expected = rounded_activations(x, qtype).double() @ w.T
    got = kernels.linear(make_linear([(raw, int(qtype), (rows, cols))]), x).double()
    assert (got - expected).abs().max() / expected.abs().max() < 2e-6


def test_fused_parts_bias_and_output_map(kernels: Kernels) -> None:
    cols = 256
    parts = [
        (random_tensor(T.Q5_0, 8, cols, seed=1), T.Q5_0, 8),
        (random_tensor(T.Q6_K, 16, cols, seed=2), T.Q6_K, 16),
        (random_tensor(T.F16, 4, cols, seed=3), T.F16, 4),
    ]
    bias = torch.randn(28)
    out_map = np.random.default_rng(0).permutation(28)
    lin = make_linear([(r, int(t), (n, cols)) for r, t, n in parts], bias, out_map)
    x = torch.randn(2, cols)
    columns = [
        rounded_activations(x, t).double() @ reference_weights(r, t, n, cols).double().T
        for r, t, n in parts
    ]
    fused = torch.cat(columns, dim=1) + bias.double()
    expected = torch.empty_like(fused)
    expected[:, torch.from_numpy(out_map)] = fused
    got = kernels.linear(lin, x).double()
    assert (got - expected).abs().max() / expected.abs().max() < 2e-6
    dense = kernels.dequantize(lin)  # rows land where the map sends them
    assert torch.equal(dense[out_map[0]], reference_weights(*parts[0][:2], 8, cols)[0])


def test_unsupported_shapes_and_types_are_refused() -> None:
    with pytest.raises(ValueError, match="no native kernel"):
        mat_of(random_tensor(T.Q2_K, 2, 256), int(T.Q2_K), (2, 256))
    with pytest.raises(ValueError, match="no native kernel"):
        mat_of(np.zeros((2, 34), np.uint8), int(T.Q8_0), (2, 37))


@pytest.mark.parametrize("qtype", TYPES, ids=lambda t: t.name)
def test_rows_do_not_depend_on_the_batch(kernels: Kernels, qtype: T) -> None:
    """A row's product is bit-identical whether it is multiplied alone or with others (the
    4-row kernels keep the one-row order), so drafts verify exactly like plain decoding."""
    rows, cols = 16, 512
    lin = make_linear([(random_tensor(qtype, rows, cols, seed=7), int(qtype), (rows, cols))])
    x = torch.randn(9, cols, generator=torch.Generator().manual_seed(2))
    together = kernels.linear(lin, x)
    alone = torch.cat([kernels.linear(lin, x[i : i + 1]) for i in range(9)])
    assert torch.equal(together, alone)
