"""Gemma 3 (text): sandwich norms with (1 + w) RMSNorm, q/k norm, GELU-tanh GLU, scaled
embeddings, 5 sliding-window layers (local RoPE base) per global layer, tied LM head."""

from ember.engine.runners.torch.arch.spec import ArchSpec

GEMMA3 = ArchSpec(
    name="gemma3",
    hf_model_types=("gemma3_text", "gemma3"),
    hf_norm_names={
        "input_layernorm": "attn_norm",
        "post_attention_layernorm": "post_attention_norm",
        "pre_feedforward_layernorm": "ffn_norm",
        "post_feedforward_layernorm": "post_ffw_norm",
    },
    qk_norm=True,
    sandwich_norms=True,
    hf_norm_offset=1.0,
    embed_scale=True,
    activation="gelu_tanh",
    tie_default=True,
)
