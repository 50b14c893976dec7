"""Llama 2/3.x, Mistral, SmolLM, TinyLlama: pre-norm, SwiGLU, GQA (GGUF's permuted Q/K rows are
undone at load: ModelHParams.rope_interleaved)."""

from ember.engine.runners.torch.arch.spec import ArchSpec

LLAMA = ArchSpec(name="llama")
