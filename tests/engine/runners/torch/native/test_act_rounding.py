"""One rounding path: a native linear's dense prefill (DENSE_PREFILL_TOKENS rows and more)
rounds its activations exactly as the kernels do, so a row's product does not depend on whether
it came in a long fresh prompt or a short cached suffix (TORCH_CACHE_HIT)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType

from ember.engine.runners.torch.layers.act_rounding import round_blocks
from ember.engine.runners.torch.layers.linear import DENSE_PREFILL_TOKENS, QLinear
from ember.engine.runners.torch.native.kernels import Kernels, make_linear
from tests.models.quants.quant_blocks import random_tensor

T = GGMLQuantizationType


def test_rounding_matches_the_kernels_rule() -> None:
    x = torch.tensor([[0.5, -1.0, 0.25, 127.0] * 8])  # one 32-block, amax 127: steps of 1
    assert torch.equal(round_blocks(x, 32, half_scale=True), x.round())
    halfway = torch.tensor([[2.5, -0.5, 1.5] + [0.0] * 28 + [127.0]])
    assert round_blocks(halfway, 32, True)[0, :3].tolist() == [2.0, -0.0, 2.0]  # half to even
    assert torch.equal(round_blocks(torch.zeros(1, 256), 256, False), torch.zeros(1, 256))


@pytest.mark.parametrize("mix", ["k-quants", "legacy", "mixed"])
def test_dense_prefill_rows_equal_kernel_rows(kernels: Kernels, mix: str) -> None:
    cols = 512
    types = {"k-quants": (T.Q4_K, T.Q6_K), "legacy": (T.Q4_0, T.Q8_0), "mixed": (T.Q5_0, T.Q6_K)}
    parts: list[tuple[Any, int, tuple[int, ...]]] = [
        (random_tensor(t, 24, cols, seed=i), int(t), (24, cols)) for i, t in enumerate(types[mix])
    ]
    out_map = np.random.default_rng(1).permutation(48)
    lin = QLinear.from_native(make_linear(parts, out_map=out_map), kernels, None)
    x = torch.randn(DENSE_PREFILL_TOKENS + 6, cols, generator=torch.Generator().manual_seed(3))
    dense = lin(x)  # the dense path
    alone = torch.cat([lin(x[i : i + 1]) for i in (0, 17, DENSE_PREFILL_TOKENS + 5)])  # kernels
    picked = dense[[0, 17, DENSE_PREFILL_TOKENS + 5]]
    assert (picked - alone).abs().max() / alone.abs().max() < 1e-5
