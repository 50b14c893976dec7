"""The bf16 prefill path (layers/bf16_product.py): weight rows dequantized straight to bfloat16
equal the float32 rows rounded by torch, bit for bit, and the chunked product of fused parts
lands every output column where the float32 product of the unrounded activations puts it,
within bfloat16 steps."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType

from ember.engine.runners.torch.layers import bf16_product as B
from ember.engine.runners.torch.native.kernels import Kernels, make_linear, mat_of
from tests.engine.runners.torch.native.test_kernels import TYPES, reference_weights
from tests.models.quants.quant_blocks import random_tensor

T = GGMLQuantizationType


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("qtype", TYPES, ids=lambda t: t.name)
def test_rows_are_the_float_rows_rounded(kernels: Kernels, qtype: T, threads: int) -> None:
    rows, cols = 24, 512
    raw = random_tensor(qtype, rows, cols, seed=int(qtype) + 7)
    part = mat_of(raw, int(qtype), (rows, cols))
    expected = reference_weights(raw, qtype, rows, cols).to(torch.bfloat16)
    out = torch.empty(13, cols, dtype=torch.bfloat16)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        kernels.dequantize_bf16(part, 5, out, torch.empty(threads * cols))
    finally:
        torch.set_num_threads(before)
    assert torch.equal(out.view(torch.int16), expected[5:18].view(torch.int16))


def test_chunks_of_fused_parts_land_in_their_columns(
    kernels: Kernels, monkeypatch: pytest.MonkeyPatch
) -> None:
    cols = 256
    monkeypatch.setattr(B, "CHUNK_BYTES", 16 * 2 * cols)  # 16-row chunks: several, one short
    parts = [
        (random_tensor(T.Q5_0, 40, cols, seed=1), T.Q5_0, 40),
        (random_tensor(T.Q6_K, 24, cols, seed=2), T.Q6_K, 24),
        (random_tensor(T.F16, 8, cols, seed=3), T.F16, 8),
    ]
    out_map = np.random.default_rng(0).permutation(72)
    lin = make_linear([(r, int(t), (n, cols)) for r, t, n in parts], out_map=out_map)
    x = torch.randn(70, cols, generator=torch.Generator().manual_seed(4))
    fused = torch.cat(
        [x.double() @ reference_weights(r, t, n, cols).double().T for r, t, n in parts],
        dim=1,
    )
    expected = torch.empty_like(fused)
    expected[:, torch.from_numpy(out_map)] = fused
    got = B.bf16_product(kernels, lin, x)
    assert got.dtype == torch.float32 and got.shape == (70, 72)
    # bfloat16 keeps 8 significant bits: x, the weights and the stored sums move by 2^-9
    # relative each; a column in the wrong place would be off by the columns' whole size
    error = (got.double() - expected).abs() / expected.abs().amax(0)
    assert error.max() < 1e-2, float(error.max())
    assert error.mean() > 0  # bfloat16, not float32, did run


def test_chunk_rows_hold_a_cache_sized_multiple_of_16() -> None:
    assert B.chunk_rows(2048) == 512 and B.chunk_rows(8192) == 128
    assert B.chunk_rows(1 << 21) == 16  # a very wide row still goes 16 rows at a time
