"""Build one layer's mixture-of-experts FFN (layers/moe.py) from a ModelSource's tensors.

The router is small (E x hidden) and routing decides which experts run, so it is kept in
float32 and multiplied in float32, like llama.cpp's (its GGUF router is F32). The experts stay
as the file stores them, stacked (E, out, in). With the native kernels the layer is one
em_moe over those stacks in the mmap (native/moe.py: nothing converted, the rows of unchosen
experts never read). With torch's kernels an expert's layers are made the first time a token
chooses it, converted to the packed form from views of that expert's rows only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ember.engine.runners.torch.layers.linear import QLinear
from ember.engine.runners.torch.layers.moe import Expert, MoEFFN
from ember.engine.runners.torch.layers.quantize import RowFix, build_linear
from ember.engine.runners.torch.residency import MADV_WILLNEED, advise
from ember.engine.runners.torch.weights import WeightTensor, resolve_format

if TYPE_CHECKING:
    from ember.engine.runners.torch.build import _Builder


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
    router, bias = router.float().contiguous(), None if bias is None else bias.float().contiguous()
    native = None
    if b.kernels is not None:
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
        parts = [gate.expert(e), up.expert(e), down.expert(e)]
        advise([t.raw for t in parts if t.raw is not None], MADV_WILLNEED)  # one read, not faults
        return Expert(
            gate_up=_expert_linear(b, parts[:2]),
            down=_expert_linear(b, parts[2:]),
        )

    return MoEFFN(router, bias, cfg.n_experts_used, cfg.norm_topk_prob, make_expert, gelu, native)


def _expert_linear(b: _Builder, parts: list[WeightTensor]) -> QLinear:
    """One expert's (fused) linear in torch's packed form (torch kernels: native layers never
    build experts one by one)."""
    fmt = resolve_format(b.opts.weight_format, parts)
    fixes: list[RowFix | None] = [None] * len(parts)
    return build_linear(parts, fixes, None, fmt, b.opts.dtype, b.opts.device)
