"""qwen3moe on the torch runner: routing, agreement with llama.cpp on the same GGUF, safetensors
against GGUF, experts read only when chosen."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pytest
import torch

from ember.engine.runners.torch.layers.linear import QLinear
from ember.engine.runners.torch.layers.moe import Expert, MoEFFN
from ember.engine.runners.torch.runner import TorchOptions, TorchRunner
from tests.fixtures.llama_reference import llama_logits

from .helpers import TINY_NEAR_TIE, TINY_TOP1, agreement_runs, prefill_logits, scored_runs

if TYPE_CHECKING:
    from ember.engine.runners.torch.model import DecoderLayer

F32 = TorchOptions(device="cpu", dtype="float32", weight_format="dense", head_format="dense")
# top-1 by the tiny models' rule (helpers.TINY_TOP1, every miss a near tie); top-5 overlap
# measured 0.969..1.0 per format (AVX2 and AVX-512)
TOP5 = 0.95


def _dense_expert(w_gate: torch.Tensor, w_up: torch.Tensor, w_down: torch.Tensor) -> Expert:
    gate_up = torch.cat((w_gate, w_up))
    return Expert(
        QLinear(gate_up.shape[0], gate_up.shape[1], None, torch.float32, dense=gate_up),
        QLinear(w_down.shape[0], w_down.shape[1], None, torch.float32, dense=w_down),
    )


@pytest.mark.parametrize("norm", [True, False])
def test_moe_equals_the_reference_formula(norm: bool) -> None:
    """softmax over all experts, top-k, optional renormalisation, weighted sum of SwiGLU experts;
    one token at a time and a grouped batch both give the formula's answer."""
    gen = torch.Generator().manual_seed(0)
    n_experts, k, hidden, width = 6, 2, 16, 8
    router = torch.randn(n_experts, hidden, generator=gen)
    mats = [
        (
            torch.randn(width, hidden, generator=gen),
            torch.randn(width, hidden, generator=gen),
            torch.randn(hidden, width, generator=gen),
        )
        for _ in range(n_experts)
    ]
    moe = MoEFFN(router, None, k, norm, lambda e: _dense_expert(*mats[e]))
    x = torch.randn(11, hidden, generator=gen)
    expected = torch.zeros_like(x)
    for t in range(x.shape[0]):
        probs = torch.softmax(router @ x[t], dim=-1)
        top = probs.topk(k)
        weights = top.values / top.values.sum() if norm else top.values
        for w, e in zip(weights, top.indices.tolist(), strict=True):
            g, u, d = mats[e]
            expected[t] += w * (d @ (torch.nn.functional.silu(g @ x[t]) * (u @ x[t])))
    assert torch.allclose(moe(x), expected, atol=1e-4)
    assert torch.allclose(moe(x[3:4]), expected[3:4], atol=1e-4)


@pytest.mark.parametrize("qtype", ["F16", "Q8_0", "Q4_0", "Q4_K_M", "Q6_K"])
def test_tiny_moe_agrees_with_llamacpp(tiny_models: Any, qtype: str) -> None:
    """Greedy next-token top-1 and top-5 against llama.cpp on the same file, prefill on each
    prompt path pinned and decode (the runner's defaults: native kernels where a compiler
    exists)."""
    path = tiny_models.gguf("qwen3moe", qtype)
    ids = [int(x) for x in np.random.default_rng(3).integers(3, 200, 64)]
    expected = llama_logits(path, ids)
    runner = TorchRunner.load(path, TorchOptions(device="cpu"))
    runs = agreement_runs(runner, ids, expected)
    for phase, top1, top5, worst in scored_runs(f"qwen3moe {qtype}", runs):
        assert top1 >= TINY_TOP1 and top5 >= TOP5 and worst <= TINY_NEAR_TIE, (
            qtype,
            phase,
            top1,
            top5,
            worst,
        )


def test_safetensors_and_gguf_of_the_same_weights_agree(tiny_models: Any) -> None:
    ids = [int(x) for x in np.random.default_rng(5).integers(3, 200, 40)]
    hf = prefill_logits(TorchRunner.load(tiny_models.hf_dir("qwen3moe"), F32), ids)
    gguf = prefill_logits(TorchRunner.load(tiny_models.gguf("qwen3moe", "F32"), F32), ids)
    assert np.abs(hf - gguf).max() < 1e-3


@pytest.mark.parametrize("kernels", ["auto", "torch"])
def test_experts_no_token_chose_are_never_built(tiny_models: Any, kernels: str) -> None:
    """A one-token prompt picks 2 of 8 experts per layer: only those are made (their rows read
    from the file); the others stay untouched in the mmap."""
    opts = TorchOptions(device="cpu", kernels=kernels)
    runner = TorchRunner.load(tiny_models.gguf("qwen3moe", "Q4_K_M"), opts)
    layers = [cast("DecoderLayer", layer).w.moe for layer in runner.model.layers]
    moes = [moe for moe in layers if moe is not None]
    assert len(moes) == len(layers) and all(moe.n_built == 0 for moe in moes)
    prefill_logits(runner, [17])
    assert [moe.n_built for moe in moes] == [2] * len(layers)
