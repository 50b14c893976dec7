"""The packed forms against torch's own kernels: the int4 convention w = (q - 8) scale + zero
per group of 32, CPU packing, and int8g's two planes summing to the 8-bit weight."""

from __future__ import annotations

import torch

from ember.engine.runners.torch.layers.pack import Int4Codes, int4_matmul, quantize_int8g


def test_int4_kernel_computes_q_minus_8_times_scale_plus_zero() -> None:
    gen = torch.Generator().manual_seed(1)
    n, k = 32, 128
    q = torch.randint(0, 16, (n, k), dtype=torch.int32, generator=gen)
    scale = torch.rand(n, k // 32, generator=gen) + 0.5
    zero = torch.randn(n, k // 32, generator=gen)
    codes = Int4Codes(q, scale, zero)
    expected = (q - 8) * scale.repeat_interleave(32, 1) + zero.repeat_interleave(32, 1)
    torch.testing.assert_close(codes.dense(), expected, rtol=0, atol=0)
    weight = codes.pack(torch.float32, torch.device("cpu"))
    x = torch.randn(3, k, generator=gen)
    torch.testing.assert_close(int4_matmul(x, weight), x @ expected.T, rtol=1e-5, atol=1e-4)


def test_int8g_planes_sum_to_the_8bit_weight() -> None:
    w = torch.randn(16, 64, generator=torch.Generator().manual_seed(2))
    low, high = quantize_int8g(w)
    step = (w.reshape(16, 2, 32).amax(-1) - w.reshape(16, 2, 32).amin(-1)) / 255  # per group
    err = (low.dense() + high.dense() - w).abs().reshape(16, 2, 32)
    assert (err <= step[..., None] / 2 * (1 + 1e-4) + 1e-6).all()
