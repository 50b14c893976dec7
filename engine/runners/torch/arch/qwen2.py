"""Qwen2 / Qwen2.5: the llama block with biases on the q, k and v projections."""

from ember.engine.runners.torch.arch.spec import ArchSpec

QWEN2 = ArchSpec(
    name="qwen2",
    hf_model_types=("qwen2",),
    hf_norm_names={"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm"},
    qkv_bias=True,
)
