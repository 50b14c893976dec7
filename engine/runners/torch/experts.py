"""Build one layer's mixture-of-experts FFN (layers/moe.py) from a ModelSource's tensors.

The router is small (E x hidden) and routing decides which experts run, so it is kept in
float32 and multiplied in float32, like llama.cpp's (its GGUF router is F32). The experts stay
as the file stores them, stacked (E, out, in). With the native kernels the layer is one
em_moe over those stacks in the mmap (native/moe.py: nothing converted, the rows of unchosen
experts never read). With torch's kernels an expert's layers are made the first time a token
chooses it, converted to the packed form from views of that expert's rows only; gpt-oss's
expert biases (ffn_*_exps.bias, (E, out) float32) become each expert's linear biases.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from ember.engine.runners.torch.layers.gated_activation import GatedActivation
from ember.engine.runners.torch.layers.linear import QLinear
from ember.engine.runners.torch.layers.moe import Expert, MoEFFN
from ember.engine.runners.torch.layers.quantize import RowFix, build_linear
from ember.engine.runners.torch.residency import MADV_WILLNEED, advise
from ember.engine.runners.torch.weights import WeightTensor, resolve_format

if TYPE_CHECKING:
    from ember.engine.runners.torch.build import _Builder
    from ember.engine.runners.torch.config import ModelConfig

MXFP4 = 39  # GGML type id: q8_0 activations, like the other 32-element block formats


def _native_type(t: WeightTensor) -> bool:
    from ember.engine.runners.torch.native.structs import NATIVE_TYPES

    return t.raw is not None and t.qtype in NATIVE_TYPES


def build_moe(b: _Builder, layer: int) -> MoEFFN:
    """The MoE FFN of layer `layer` (GGUF names blk.N.ffn_gate_inp / ffn_*_exps)."""
    p, cfg = f"blk.{layer}.", b.cfg
    router = b.tensor(p + "ffn_gate_inp.weight").to_float().to(b.opts.device)
    bias_name = p + "ffn_gate_inp.bias"
    bias = b.tensor(bias_name).to_float().to(b.opts.device) if b.has(bias_name) else None
    gate = b.tensor(p + "ffn_gate_exps.weight")
    up = b.tensor(p + "ffn_up_exps.weight")
    down = b.tensor(p + "ffn_down_exps.weight")

    gelu = cfg.activation == "gelu_tanh"
    act = GatedActivation(cfg.activation, cfg.swiglu_alpha, cfg.swiglu_limit)
    router, bias = router.float().contiguous(), None if bias is None else bias.float().contiguous()
    biases = _expert_biases(b, p) if cfg.expert_bias else None
    native = None
    if b.kernels is not None and native_moe_ready(cfg):
        from ember.engine.runners.torch.native.moe import NativeMoE

        stacks = {"gate": gate, "up": up, "down": down}
        native = NativeMoE(
            b.kernels.lib,
            router,
            bias,
            {k: (t.raw, t.qtype, t.shape) for k, t in stacks.items()},
            cfg.n_experts_used,
            cfg.norm_topk_prob,
            gelu,
        )

    def make_expert(e: int) -> Expert:
        gate_up_bias = down_bias = None
        if biases is not None:
            gate_up_bias = torch.cat((biases[0][e], biases[1][e]))
            down_bias = biases[2][e]
        parts = [gate.expert(e), up.expert(e), down.expert(e)]
        advise([t.raw for t in parts if t.raw is not None], MADV_WILLNEED)  # one read, not faults
        gate_up = _expert_linear(b, parts[:2], gate_up_bias)
        down_linear = _expert_linear(b, parts[2:], down_bias)
        # a quantized product rounds its input to 8 bits, as llama.cpp's do: native linears
        # themselves, torch's packed ones here; a dense (float) weight multiplies floats
        block = _act_block(gate) if gate_up.fmt in ("int4", "int8", "int8g") else 0
        return Expert(gate_up=gate_up, down=down_linear, act_block=block)

    return MoEFFN(
        router,
        bias,
        cfg.n_experts_used,
        cfg.norm_topk_prob,
        make_expert,
        act,
        native,
        cfg.moe_routing,
    )


def native_moe_ready(cfg: ModelConfig) -> bool:
    """Whether csrc/moe.c computes this MoE: softmax-then-top-k routing, no expert biases, a
    silu or gelu gate. Otherwise (gpt-oss) routing runs here and each expert on its own
    linears (native ones where the kernels multiply the expert's type)."""
    return (
        cfg.moe_routing == "softmax_topk"
        and not cfg.expert_bias
        and cfg.activation in ("silu", "gelu_tanh")
    )


def _act_block(stack: WeightTensor) -> int:
    """The 8-bit activation block llama.cpp rounds to before this type's dots (0: float)."""
    from ember.engine.runners.torch.layers.act_rounding import block_of

    return 32 if stack.qtype == MXFP4 else block_of(stack.qtype)


def _expert_biases(b: _Builder, prefix: str) -> tuple[torch.Tensor, ...]:
    """(gate (E, F), up (E, F), down (E, hidden)) float32 biases of one layer's experts."""
    names = ("ffn_gate_exps.bias", "ffn_up_exps.bias", "ffn_down_exps.bias")
    return tuple(b.tensor(prefix + n).to_float().to(b.opts.device) for n in names)


def _expert_linear(
    b: _Builder, parts: list[WeightTensor], bias: torch.Tensor | None = None
) -> QLinear:
    """One expert's (fused) linear: the file's blocks under the native kernels where they
    multiply its type (a MoE that moe.c does not compute), else torch's packed form."""
    if b.kernels is not None and all(_native_type(t) for t in parts):
        from ember.engine.runners.torch.native.kernels import make_linear

        native = make_linear([(t.raw, t.qtype, t.shape) for t in parts], bias)
        return QLinear.from_native(native, b.kernels, bias)
    fmt = resolve_format(b.opts.weight_format, parts)
    fixes: list[RowFix | None] = [None] * len(parts)
    return build_linear(parts, fixes, bias, fmt, b.opts.dtype, b.opts.device)
