"""Llama 2/3.x, Mistral, SmolLM, TinyLlama: pre-norm, SwiGLU, GQA; GGUF permutes Q/K rows."""

from ember.engine.runners.torch.arch.spec import ArchSpec

LLAMA = ArchSpec(
    name="llama",
    hf_model_types=("llama", "mistral"),
    hf_norm_names={"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm"},
    gguf_permuted_qk=True,
)
