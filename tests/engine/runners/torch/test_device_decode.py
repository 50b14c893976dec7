"""The accelerator paths, run on the CPU: batched one-token decode through padded block tables
(what CUDA graphs capture) equals the per-sequence path; SDPA equals the explicit attention."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from ember.engine.runners.base import ForwardBatch
from ember.engine.runners.torch.device_decode import decode_batch, one_token_steps
from ember.engine.runners.torch.layers.attention import attend, attend_matmuls, attend_sdpa
from ember.engine.runners.torch.runner import TorchOptions, TorchRunner

from .helpers import SimpleSeq, scattered_blocks

REFERENCE = TorchOptions(device="cpu", dtype="float32", weight_format="dense", head_format="dense")


@pytest.mark.parametrize("arch", ["llama", "gemma3"])
@pytest.mark.parametrize("kv_dtype", ["float32", "int8"])
def test_batched_decode_equals_per_sequence(tiny_models: Any, arch: str, kv_dtype: str) -> None:
    """Three sequences of different lengths (gemma3's sliding layers see only their window)
    decode together through the tables; every row matches the one-by-one forward."""
    opts = TorchOptions(
        device="cpu", dtype="float32", weight_format="dense", head_format="dense", kv_dtype=kv_dtype
    )
    runner = TorchRunner.load(tiny_models.gguf(arch, "F32"), opts)
    runner.init_kv(64, 4)
    free = scattered_blocks(64)
    rng = np.random.default_rng(1)
    seqs = [SimpleSeq(i, 4, free) for i in range(3)]
    for seq, length in zip(seqs, (5, 23, 41), strict=True):
        prompt = [int(x) for x in rng.integers(3, 200, length)]
        runner.forward(ForwardBatch([seq.step(prompt)]))
    for _ in range(3):
        steps = [seq.step([int(rng.integers(3, 200))]) for seq in seqs]
        assert one_token_steps(steps)
        batched = decode_batch(runner, steps)
        # the same KV slots are rewritten with the same values, so the per-sequence pass sees
        # exactly the cache the batched pass saw
        single = [runner.forward(ForwardBatch([st]))[0] for st in steps]
        for got, want in zip(batched, single, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("causal", [True, False])
def test_sdpa_matches_explicit_attention(causal: bool) -> None:
    torch.manual_seed(0)
    q, k, v = torch.randn(6, 4, 16), torch.randn(6, 2, 16), torch.randn(6, 2, 16)
    mask = torch.ones(6, 6, dtype=torch.bool).tril()
    if not causal:
        mask &= ~torch.eye(6, dtype=torch.bool).roll(1, 0)  # some other pattern
        mask[0, 0] = True
    want = attend_matmuls(q, k, v, mask, 0.25, None, None)
    torch.testing.assert_close(attend_sdpa(q, k, v, mask, 0.25), want, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(attend(q, k, v, mask, 0.25, None), want, rtol=1e-4, atol=1e-5)


def test_reference_options_never_take_the_device_path(tiny_models: Any) -> None:
    runner = TorchRunner.load(tiny_models.gguf("llama", "F32"), REFERENCE)
    assert runner.graphs is None and runner.native is None
