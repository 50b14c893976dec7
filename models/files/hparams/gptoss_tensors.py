"""gpt-oss's tensors: the GGUF names llama.cpp gives them, and where a Hugging Face checkpoint
keeps the same weights (tensors.py asks here for everything gpt-oss does differently).

GGUF (llama.cpp's LLM_ARCH_OPENAI_MOE), per layer:
    attn_norm, post_attention_norm (the FFN's pre-norm), attn_{q,k,v,output}.{weight,bias},
    attn_sinks.weight (H,), ffn_gate_inp.{weight,bias} (the router),
    ffn_{gate,up}_exps.weight (E, F, hidden) + .bias (E, F), ffn_down_exps.weight (E, hidden, F)
    + .bias (E, hidden); the experts usually MXFP4.
Hugging Face (GptOssForCausalLM), per layer under `model.layers.N.`:
    input_layernorm, post_attention_layernorm, self_attn.{q,k,v,o}_proj.{weight,bias},
    self_attn.sinks (no .weight), mlp.router.{weight,bias}, and the experts fused per layer:
    mlp.experts.gate_up_proj (E, hidden, 2F) with gate and up columns interleaved (gate 0::2,
    up 1::2) + gate_up_proj_bias (E, 2F), mlp.experts.down_proj (E, F, hidden) + down_proj_bias
    (E, hidden); OpenAI's release keeps the two matrices as MXFP4 instead: `_blocks`
    (E, out, in / 32, 16) and `_scales` (E, out, in / 32), rows = output features.
"""

from __future__ import annotations

from ember.models.errors import ModelFileError
from ember.models.files.hparams.hparams import ModelHParams

ARCH = "gpt-oss"
HF_LAYER = {
    "attn_norm": "input_layernorm",
    "post_attention_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate_inp": "mlp.router",
}
SINKS, HF_SINKS = "attn_sinks.weight", "self_attn.sinks"
EXPERT_STACKS = ("ffn_gate_exps", "ffn_up_exps", "ffn_down_exps")


def layer_shapes(hp: ModelHParams) -> dict[str, tuple[int, ...]]:
    """What a gpt-oss layer has beyond (or instead of) the common ones: the FFN pre-norm under
    llama.cpp's post_attention_norm name, the sinks, the router bias, the experts' biases."""
    n, width, hidden = hp.n_experts, hp.expert_ffn_size, hp.hidden_size
    shapes: dict[str, tuple[int, ...]] = {
        "post_attention_norm.weight": (hidden,),
        "ffn_gate_inp.bias": (n,),
    }
    if hp.attn_sinks:
        shapes[SINKS] = (hp.n_heads,)
    if hp.expert_bias:
        shapes |= {
            "ffn_gate_exps.bias": (n, width),
            "ffn_up_exps.bias": (n, width),
            "ffn_down_exps.bias": (n, hidden),
        }
    return shapes


def hf_name(part: str, kind: str, layer: str, prefix: str) -> str | None:
    """The HF name of GGUF tensor blk.{layer}.{part}.{kind} outside the experts (None: none)."""
    if f"{part}.{kind}" == SINKS:
        return f"{prefix}layers.{layer}.{HF_SINKS}"
    module = HF_LAYER.get(part)
    return None if module is None else f"{prefix}layers.{layer}.{module}.{kind}"


def gguf_name(layer: str, rest: str) -> str | None:
    """The GGUF name of HF tensor `model.layers.{layer}.{rest}` outside the experts."""
    if rest == HF_SINKS:
        return f"blk.{layer}.{SINKS}"
    module, _, kind = rest.rpartition(".")
    for part, hf_module in HF_LAYER.items():
        if hf_module == module and kind in ("weight", "bias"):
            return f"blk.{layer}.{part}.{kind}"
    return None


def hf_expert_shapes(hp: ModelHParams, mxfp4: bool) -> dict[str, tuple[int, ...]]:
    """HF expert tensor suffix (after `mlp.experts.`) -> shape, in the checkpoint's form."""
    n, width, hidden = hp.n_experts, hp.expert_ffn_size, hp.hidden_size
    shapes: dict[str, tuple[int, ...]] = {}
    if mxfp4:  # rows are output features, 32-element blocks along the input
        for name, rows, cols in (("gate_up_proj", 2 * width, hidden), ("down_proj", hidden, width)):
            if cols % 32:
                raise ModelFileError(f"{name}: MXFP4 rows of {cols} are not whole 32-blocks")
            shapes[f"{name}_blocks"] = (n, rows, cols // 32, 16)
            shapes[f"{name}_scales"] = (n, rows, cols // 32)
    else:
        shapes |= {"gate_up_proj": (n, hidden, 2 * width), "down_proj": (n, width, hidden)}
    if hp.expert_bias:
        shapes |= {"gate_up_proj_bias": (n, 2 * width), "down_proj_bias": (n, hidden)}
    return shapes


def is_mxfp4(layer: int, shapes: dict[str, tuple[int, ...]], prefix: str) -> bool:
    """Whether a checkpoint keeps layer `layer`'s experts as MXFP4 blocks and scales."""
    return f"{prefix}layers.{layer}.mlp.experts.gate_up_proj_blocks" in shapes


def check_hf_experts(
    hp: ModelHParams, layer: int, shapes: dict[str, tuple[int, ...]], prefix: str
) -> None:
    """ModelFileError for a missing or misshapen expert tensor of one layer."""
    base = f"{prefix}layers.{layer}.mlp.experts."
    for suffix, shape in hf_expert_shapes(hp, is_mxfp4(layer, shapes, prefix)).items():
        got = shapes.get(base + suffix)
        if got is None:
            raise ModelFileError(f"missing tensor {base + suffix} ({ARCH})")
        if tuple(got) != shape:
            raise ModelFileError(
                f"tensor {base + suffix} has shape {tuple(got)}, expected {shape} "
                f"from the {ARCH} hyperparameters"
            )
