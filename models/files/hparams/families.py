"""What transformers' config classes default to, per model family (transformers 5.x values).

A config.json may leave any key out; transformers then uses its config class's default, and so
do we (from_hf.py). Only the defaults that change what the model computes are listed. Sizes have
no default except in gemma3, whose multimodal configs leave the text model's sizes at
Gemma3TextConfig's values.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Family:
    """One transformers config family: our architecture name and its class's defaults."""

    arch: str  # our (GGUF) architecture name
    context: int  # max_position_embeddings
    rope_theta: float = 10000.0
    head_dim: int | None = None  # None: hidden_size // num_attention_heads
    kv_heads: int | None = None  # num_key_value_heads; None: num_attention_heads
    # how layers slide: "none" (never), "all" (every layer when sliding_window is set),
    # "switch" (qwen: use_sliding_window, layers from max_window_layers on), "flag" (qwen3_moe:
    # use_sliding_window makes every layer slide), "pattern" (gemma2/3), "refused" (smollm3:
    # use_sliding_window would slide only the NoPE layers, which we do not build)
    sliding: str = "none"
    sliding_window: int | None = None
    sliding_pattern: int | None = None  # every Nth layer global
    local_theta: float | None = None  # sliding layers' RoPE base
    query_pre_attn_scalar: float | None = None  # None: head_dim
    act: str = "silu"
    tie: bool = False
    reads_attention_bias: bool = False  # attention_bias adds q/k/v/o biases
    reads_mlp_bias: bool = False
    sizes: dict[str, int] = field(default_factory=dict)
    multimodal: bool = False  # the text model's config is in text_config
    moe: bool = False  # num_experts, num_experts_per_tok, moe_intermediate_size, norm_topk_prob
    text_family: str = ""
    attn_softcap: float | None = None  # attn_logit_softcapping (gemma2: 50)
    final_softcap: float | None = None  # final_logit_softcapping (gemma2: 30)
    nope: bool = False  # no_rope_layers / no_rope_layer_interval (smollm3)
    norm_offset: float = 0.0  # RMSNorm's (offset + w): gemma's checkpoints store w - 1


_GEMMA3_TEXT_SIZES = {
    "vocab_size": 262_208,
    "hidden_size": 2304,
    "intermediate_size": 9216,
    "num_hidden_layers": 26,
    "num_attention_heads": 8,
}

FAMILIES: dict[str, Family] = {
    "llama": Family("llama", 2048, reads_attention_bias=True, reads_mlp_bias=True),
    "mistral": Family("llama", 131_072, kv_heads=8, sliding="all", sliding_window=4096),
    "qwen2": Family("qwen2", 32_768, kv_heads=32, sliding="switch", sliding_window=4096),
    "qwen3": Family(
        "qwen3",
        32_768,
        head_dim=128,
        kv_heads=32,
        sliding="switch",
        sliding_window=4096,
        reads_attention_bias=True,
    ),
    "qwen3_moe": Family(
        "qwen3moe",
        32_768,
        kv_heads=4,
        sliding="flag",
        sliding_window=4096,
        reads_attention_bias=True,
        moe=True,
    ),
    "gemma3_text": Family(
        "gemma3",
        131_072,
        rope_theta=1_000_000.0,
        head_dim=256,
        sliding="pattern",
        sliding_window=4096,
        sliding_pattern=6,
        local_theta=10_000.0,
        kv_heads=4,
        query_pre_attn_scalar=256.0,
        act="gelu_pytorch_tanh",
        tie=True,
        reads_attention_bias=True,
        sizes=_GEMMA3_TEXT_SIZES,
        norm_offset=1.0,
    ),
    "gemma3": Family("gemma3", 131_072, multimodal=True, text_family="gemma3_text"),
    # dense families of issue 24
    "phi3": Family("phi3", 4096, sliding="all"),
    "gemma2": Family(
        "gemma2",
        8192,
        head_dim=256,
        kv_heads=4,
        sliding="pattern",
        sliding_window=4096,
        sliding_pattern=2,
        query_pre_attn_scalar=256.0,
        act="gelu_pytorch_tanh",
        tie=True,
        reads_attention_bias=True,
        attn_softcap=50.0,
        final_softcap=30.0,
        norm_offset=1.0,
    ),
    "smollm3": Family(
        "smollm3",
        32_768,
        rope_theta=2_000_000.0,
        kv_heads=4,
        sliding="refused",
        tie=True,
        reads_attention_bias=True,
        reads_mlp_bias=True,
        nope=True,
    ),
    "ministral3": Family("mistral3", 262_144, rope_theta=1_000_000.0, head_dim=128, kv_heads=8),
    "mistral3": Family("mistral3", 262_144, multimodal=True, text_family="ministral3"),
}

# HF model classes -> FAMILIES key
ARCH_BY_CLASS: dict[str, str] = {
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "mistral",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
    "Qwen3MoeForCausalLM": "qwen3_moe",
    "Gemma3ForCausalLM": "gemma3_text",
    "Gemma3ForConditionalGeneration": "gemma3",
    "Phi3ForCausalLM": "phi3",
    "Gemma2ForCausalLM": "gemma2",
    "SmolLM3ForCausalLM": "smollm3",
    "Ministral3ForCausalLM": "ministral3",
    "Mistral3ForConditionalGeneration": "mistral3",
}
