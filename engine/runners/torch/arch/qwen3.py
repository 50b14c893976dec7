"""Qwen3: the llama block with per-head RMSNorm on q and k (before RoPE), no biases."""

from ember.engine.runners.torch.arch.spec import ArchSpec

QWEN3 = ArchSpec(
    name="qwen3",
    hf_model_types=("qwen3",),
    hf_norm_names={"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm"},
    qk_norm=True,
)
