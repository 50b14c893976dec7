"""The tiled 8-bit matmul (csrc/gemm.c) on every ISA path this CPU runs: the one-row dots'
results bit for bit (so a row's product never depends on the batch or the path), and the
reference (gguf dequantization + float64 matmul of the 8-bit-rounded activations)."""

from __future__ import annotations

import ctypes as C

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType

from ember.engine.runners.torch.native.choice import FOREVER
from ember.engine.runners.torch.native.kernels import Kernels, make_linear
from tests.models.quants.quant_blocks import random_tensor

from .test_kernels import reference_weights, rounded_activations

T = GGMLQuantizationType
TILED = (T.Q4_0, T.Q5_0, T.Q8_0, T.Q4_K, T.Q5_K, T.Q6_K)


def both_paths(kernels: Kernels, lin: object, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    with kernels.gemm_rows(FOREVER):
        dots = kernels.linear(lin, x)  # type: ignore[arg-type]
    with kernels.gemm_rows(1):
        tiled = kernels.linear(lin, x)  # type: ignore[arg-type]
    return dots, tiled


@pytest.mark.parametrize("qtype", TILED, ids=lambda t: t.name)
@pytest.mark.parametrize(("rows", "m"), [(37, 67), (130, 9), (2, 1)])
def test_tiled_equals_dots_and_reference(kernels: Kernels, qtype: T, rows: int, m: int) -> None:
    """Odd row and token counts cover the tiles' tails (2 rows x 4 tokens per kernel call)."""
    cols = 768
    raw = random_tensor(qtype, rows, cols, seed=int(qtype) + rows)
    lin = make_linear([(raw, int(qtype), (rows, cols))])
    x = torch.randn(m, cols, generator=torch.Generator().manual_seed(rows + m)) * 3
    dots, tiled = both_paths(kernels, lin, x)
    assert torch.equal(tiled, dots), f"{qtype.name}: tiled and one-row products differ"
    w = reference_weights(raw, qtype, rows, cols).double()
    expected = rounded_activations(x, qtype).double() @ w.T
    assert (tiled.double() - expected).abs().max() / expected.abs().max() < 2e-6


def test_tiled_fused_parts_bias_and_output_map(kernels: Kernels) -> None:
    cols = 512
    parts = [(T.Q5_0, 10), (T.Q6_K, 6), (T.Q8_0, 4)]
    raws = [random_tensor(t, n, cols, seed=i) for i, (t, n) in enumerate(parts)]
    n_out = sum(n for _, n in parts)
    bias = torch.randn(n_out)
    out_map = np.random.default_rng(1).permutation(n_out)
    lin = make_linear(
        [(r, int(t), (n, cols)) for r, (t, n) in zip(raws, parts, strict=True)], bias, out_map
    )
    x = torch.randn(21, cols, generator=torch.Generator().manual_seed(5))
    dots, tiled = both_paths(kernels, lin, x)
    assert torch.equal(tiled, dots)
    columns = [
        rounded_activations(x, t).double() @ reference_weights(r, t, n, cols).double().T
        for r, (t, n) in zip(raws, parts, strict=True)
    ]
    fused = torch.cat(columns, dim=1) + bias.double()
    expected = torch.empty_like(fused)
    expected[:, torch.from_numpy(out_map)] = fused
    assert (tiled.double() - expected).abs().max() / expected.abs().max() < 2e-6


def test_types_without_a_tile_run_the_dots(kernels: Kernels) -> None:
    """A linear with a part the tiles do not cover (Q4_1, F16) is refused by em_gemm_ok and
    multiplied by the one-row dots whatever the batch."""
    cols = 256
    tiled = make_linear([(random_tensor(T.Q4_K, 8, cols, seed=1), int(T.Q4_K), (8, cols))])
    mixed = make_linear(
        [
            (random_tensor(T.Q4_K, 8, cols, seed=1), int(T.Q4_K), (8, cols)),
            (random_tensor(T.Q4_1, 8, cols, seed=2), int(T.Q4_1), (8, cols)),
        ]
    )
    assert kernels.lib.em_gemm_ok(C.byref(tiled.desc)) == 1
    assert kernels.lib.em_gemm_ok(C.byref(mixed.desc)) == 0
    x = torch.randn(40, cols, generator=torch.Generator().manual_seed(3))
    dots, tiled_run = both_paths(kernels, mixed, x)
    assert torch.equal(dots, tiled_run)
    w = torch.cat(
        [
            reference_weights(random_tensor(T.Q4_K, 8, cols, seed=1), T.Q4_K, 8, cols),
            reference_weights(random_tensor(T.Q4_1, 8, cols, seed=2), T.Q4_1, 8, cols),
        ]
    ).double()
    expected = torch.cat(
        [
            rounded_activations(x, T.Q4_K).double() @ w[:8].T,
            rounded_activations(x, T.Q4_1).double() @ w[8:].T,
        ],
        dim=1,
    )
    assert (dots.double() - expected).abs().max() / expected.abs().max() < 2e-6


def test_many_threads_and_large_batches_agree(kernels: Kernels) -> None:
    """Items are claimed dynamically by threads: the split must not change a bit."""
    rows, cols = 300, 1024
    lin = make_linear([(random_tensor(T.Q6_K, rows, cols, seed=9), int(T.Q6_K), (rows, cols))])
    x = torch.randn(130, cols, generator=torch.Generator().manual_seed(9))
    before = torch.get_num_threads()
    try:
        with kernels.gemm_rows(1):
            one = kernels.linear(lin, x)
            torch.set_num_threads(4)
            four = kernels.linear(lin, x)
    finally:
        torch.set_num_threads(before)
    assert torch.equal(one, four)
