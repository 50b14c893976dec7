"""The native routed FFN (csrc/moe.c through native/moe.py) against the formula over the
reference dequantizers, and against the per-expert path (one native linear per chosen expert),
for a decode token, short batches and prefill-sized ones (several tokens per expert)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from gguf import GGMLQuantizationType

from ember.engine.runners.torch.layers.gated_activation import GatedActivation
from ember.engine.runners.torch.layers.linear import QLinear
from ember.engine.runners.torch.layers.moe import Expert, MoEFFN
from ember.engine.runners.torch.native import moe as native_moe
from ember.engine.runners.torch.native.choice import FOREVER
from ember.engine.runners.torch.native.kernels import Kernels, make_linear
from ember.engine.runners.torch.native.moe import NativeMoE
from tests.models.quants.quant_blocks import random_tensor

from .test_kernels import reference_weights, rounded_activations

T = GGMLQuantizationType
E, K, HIDDEN, WIDTH = 8, 2, 256, 256
# (gate/up type, down type): Qwen3-MoE Q4_K_M files mix Q4_K and Q6_K; the 32-blocks, and float
# weights (which read the float activations, not their 8-bit codes)
TYPE_PAIRS = [(T.Q4_K, T.Q6_K), (T.Q8_0, T.Q4_0), (T.Q5_K, T.F16), (T.F16, T.Q8_0)]


class Layer:
    """Random expert stacks of one layer, their reference float weights and a router."""

    def __init__(self, gate_up: T, down: T, seed: int, bias: bool = False) -> None:
        gen = torch.Generator().manual_seed(seed)
        self.router = torch.randn(E, HIDDEN, generator=gen)
        self.bias = torch.randn(E, generator=gen) if bias else None
        shapes = {"gate": (E, WIDTH, HIDDEN), "up": (E, WIDTH, HIDDEN), "down": (E, HIDDEN, WIDTH)}
        types = {"gate": gate_up, "up": gate_up, "down": down}
        self.stacks = {}
        self.ref = {}
        for i, (name, (n, rows, cols)) in enumerate(shapes.items()):
            raw = random_tensor(types[name], n * rows, cols, seed=seed * 10 + i)
            self.stacks[name] = (raw, int(types[name]), (n, rows, cols))
            self.ref[name] = reference_weights(raw, types[name], n * rows, cols).double()
        self.types = types

    def native(self, kernels: Kernels, norm: bool = True, gelu: bool = False) -> NativeMoE:
        return NativeMoE(kernels.lib, self.router, self.bias, self.stacks, K, norm, gelu)

    def per_expert(self, kernels: Kernels, norm: bool = True, gelu: bool = False) -> MoEFFN:
        """The same layer with one native linear per chosen expert (the path before moe.c)."""

        def rows(name: str, e: int) -> tuple[np.ndarray, int, tuple[int, int]]:
            raw, qtype, (_, out, cols) = self.stacks[name]
            per = raw.shape[0] // E
            return raw[e * per : (e + 1) * per], qtype, (out, cols)

        def make(e: int) -> Expert:
            gate_up = make_linear([rows("gate", e), rows("up", e)])
            down = make_linear([rows("down", e)])
            return Expert(
                QLinear.from_native(gate_up, kernels, None),
                QLinear.from_native(down, kernels, None),
            )

        act = GatedActivation("gelu_tanh" if gelu else "silu")
        return MoEFFN(self.router, self.bias, K, norm, make, act)

    def formula(self, x: torch.Tensor, norm: bool = True, gelu: bool = False) -> torch.Tensor:
        """softmax routing, top-k, SwiGLU experts over rounded activations, in float64."""
        logits = x.double() @ self.router.double().T
        if self.bias is not None:
            logits = logits + self.bias.double()
        top = torch.softmax(logits, -1).topk(K, -1)
        weights = top.values / top.values.sum(-1, keepdim=True) if norm else top.values
        out = torch.zeros(x.shape, dtype=torch.float64)
        xg = rounded_activations(x, self.types["gate"]).double()
        for t in range(x.shape[0]):
            for w, e in zip(weights[t].tolist(), top.indices[t].tolist(), strict=True):
                span = slice(e * WIDTH, (e + 1) * WIDTH)
                g, u = self.ref["gate"][span] @ xg[t], self.ref["up"][span] @ xg[t]
                h = (F.gelu(g, approximate="tanh") if gelu else F.silu(g)) * u
                h = rounded_activations(h.float()[None], self.types["down"]).double()[0]
                out[t] += w * (self.ref["down"][e * HIDDEN : (e + 1) * HIDDEN] @ h)
        return out


def _relative(got: torch.Tensor, expected: torch.Tensor) -> float:
    return float((got.double() - expected.double()).abs().max() / expected.abs().max())


@pytest.mark.parametrize("types", TYPE_PAIRS, ids=lambda p: f"{p[0].name}-{p[1].name}")
@pytest.mark.parametrize("n_tokens", [1, 7, 70])
def test_native_moe_equals_the_per_expert_path(
    kernels: Kernels, types: tuple[T, T], n_tokens: int
) -> None:
    """Same kernels, same rounding: only the router's float32 sum order differs."""
    layer = Layer(*types, seed=n_tokens)
    x = torch.randn(n_tokens, HIDDEN, generator=torch.Generator().manual_seed(1))
    expected = layer.per_expert(kernels)(x)
    got = layer.native(kernels).forward(x)
    assert _relative(got, expected) < 1e-5


@pytest.mark.parametrize("types", TYPE_PAIRS, ids=lambda p: f"{p[0].name}-{p[1].name}")
@pytest.mark.parametrize("norm", [True, False])
def test_native_moe_equals_the_formula(kernels: Kernels, types: tuple[T, T], norm: bool) -> None:
    """Up to the 8-bit rounding of activations, which the reference applies the same way (a
    code at a rounding boundary may land one step apart: ~1/127 of one block's element)."""
    layer = Layer(*types, seed=3)
    x = torch.randn(40, HIDDEN, generator=torch.Generator().manual_seed(2))
    got = layer.native(kernels, norm=norm).forward(x)
    assert _relative(got, layer.formula(x, norm=norm)) < 2e-3


@pytest.mark.parametrize("types", TYPE_PAIRS, ids=lambda p: f"{p[0].name}-{p[1].name}")
def test_tiled_and_one_row_experts_agree_bit_for_bit(kernels: Kernels, types: tuple[T, T]) -> None:
    """Experts with many rows run the tiled matmul (gemm.c), few the one-row dots: the same
    sums (types without tiles, F16, take the dots either way)."""
    layer = Layer(*types, seed=11)
    x = torch.randn(70, HIDDEN, generator=torch.Generator().manual_seed(6))  # ~17 rows an expert
    with kernels.gemm_rows(FOREVER):
        dots = layer.native(kernels).forward(x)
    with kernels.gemm_rows(1):
        tiled = layer.native(kernels).forward(x)
    assert torch.equal(tiled, dots)
    assert _relative(tiled, layer.formula(x)) < 2e-3


def test_router_bias_and_gelu(kernels: Kernels) -> None:
    layer = Layer(T.Q8_0, T.Q8_0, seed=5, bias=True)
    x = torch.randn(9, HIDDEN, generator=torch.Generator().manual_seed(3))
    got = layer.native(kernels, gelu=True).forward(x)
    assert _relative(got, layer.formula(x, gelu=True)) < 2e-3
    assert _relative(got, layer.per_expert(kernels, gelu=True)(x)) < 1e-5


def test_chosen_counts_follow_the_routing(kernels: Kernels) -> None:
    """`chosen` counts each expert's picks: the experts never picked were never read."""
    layer = Layer(T.Q4_K, T.Q6_K, seed=7)
    moe = layer.native(kernels)
    x = torch.randn(5, HIDDEN, generator=torch.Generator().manual_seed(4))
    moe.forward(x)
    _, ids = layer.per_expert(kernels).route(x)
    assert moe.chosen.tolist() == torch.bincount(ids.reshape(-1), minlength=E).tolist()
    assert moe.n_chosen == len(set(ids.reshape(-1).tolist())) < E


def test_long_batches_go_in_chunks(kernels: Kernels, monkeypatch: pytest.MonkeyPatch) -> None:
    layer = Layer(T.Q4_K, T.Q6_K, seed=9)
    x = torch.randn(23, HIDDEN, generator=torch.Generator().manual_seed(5))
    whole = layer.native(kernels).forward(x)
    monkeypatch.setattr(native_moe, "MAX_TOKENS_PER_CALL", 4)
    assert torch.equal(layer.native(kernels).forward(x), whole)
