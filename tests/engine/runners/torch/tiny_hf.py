"""Tiny random Hugging Face models of each supported architecture (float32, 2 layers)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

ARCHS = ("llama", "qwen2", "qwen3", "gemma3")
VOCAB = 256


def _config(arch: str, **overrides: Any) -> Any:
    import transformers as tf

    common: dict[str, Any] = dict(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
    )
    common.update(overrides)
    if arch == "llama":
        return tf.LlamaConfig(**common)
    if arch == "qwen2":
        return tf.Qwen2Config(**common)
    if arch == "qwen3":
        return tf.Qwen3Config(head_dim=16, **common)
    if arch == "gemma3":
        common["tie_word_embeddings"] = overrides.get("tie_word_embeddings", True)
        return tf.Gemma3TextConfig(
            head_dim=16,
            query_pre_attn_scalar=16,
            sliding_window=8,  # small, so a 64-token prompt crosses it
            layer_types=["sliding_attention", "full_attention"],
            **{k: v for k, v in common.items()},
        )
    raise ValueError(arch)


def make_hf_model(arch: str, folder: Path, seed: int = 0, **overrides: Any) -> Any:
    """Save a random tiny model of arch into folder; return the transformers model (eval, f32)."""
    import torch
    import transformers as tf

    torch.manual_seed(seed)
    config = _config(arch, **overrides)
    model = tf.AutoModelForCausalLM.from_config(config, attn_implementation="eager").float().eval()
    with torch.no_grad():  # random norms, so a wrong (1 + w) or a missed norm shows up
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(torch.randn_like(p) * 0.3 + (0.0 if arch == "gemma3" else 1.0))
            elif name.endswith("bias"):
                p.copy_(torch.randn_like(p) * 0.1)
    model.save_pretrained(folder, safe_serialization=True)
    return model


def hf_logits(model: Any, ids: list[int]) -> Any:
    """float32 logits (T, vocab) of a plain forward over ids."""
    import torch

    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].float()
