"""What differs between the supported decoder architectures, as data."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ArchSpec:
    """One architecture: its names in GGUF and HF files and its structural switches."""

    name: str  # GGUF general.architecture
    hf_model_types: tuple[str, ...]  # config.json model_type values
    # HF layer-norm module name -> GGUF tensor name (post_attention_layernorm differs by family)
    hf_norm_names: dict[str, str] = field(default_factory=dict)
    gguf_permuted_qk: bool = False  # llama.cpp's converter permutes Q/K rows (interleaved RoPE)
    qkv_bias: bool = False  # HF: always has q/k/v biases (qwen2)
    qk_norm: bool = False  # per-head RMSNorm of q and k before RoPE
    sandwich_norms: bool = False  # extra norms after attention and after the FFN
    hf_norm_offset: float = 0.0  # HF stores w - 1 (gemma: RMSNorm multiplies by 1 + w)
    embed_scale: bool = False  # multiply embeddings by sqrt(hidden)
    activation: str = "silu"
    tie_default: bool = False  # HF tie_word_embeddings default
