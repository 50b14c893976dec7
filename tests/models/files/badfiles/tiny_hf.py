"""Tiny Hugging Face safetensors folders (llama, qwen2, qwen3, gemma3; 2 layers), built in code.

config.json comes from transformers' own config classes (the installed generation's format), or a
hand-written transformers-4.x style dict with `legacy_config=True`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch


HIDDEN, FFN, N_HEADS, N_KV, HEAD_DIM, N_LAYERS, VOCAB = 64, 128, 2, 1, 32, 2, 40
TEMPLATE = "{% for m in messages %}<|im_start|>{{ m['content'] }}<|im_end|>{% endfor %}"
_CLASS = {
    "llama": "LlamaForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
    "gemma3": "Gemma3ForCausalLM",
}


def hf_config(arch: str, *, tied: bool, legacy: bool = False) -> dict[str, Any]:
    """config.json contents for a tiny model of `arch`."""
    sizes = dict(
        num_hidden_layers=N_LAYERS,
        hidden_size=HIDDEN,
        intermediate_size=FFN,
        num_attention_heads=N_HEADS,
        num_key_value_heads=N_KV,
        head_dim=HEAD_DIM,
        vocab_size=VOCAB,
        max_position_embeddings=512,
        tie_word_embeddings=tied,
    )
    if legacy:
        extra: dict[str, Any] = {"rope_theta": 500000.0, "rms_norm_eps": 1e-5}
        if arch == "gemma3":
            extra |= {"model_type": "gemma3_text", "rope_local_base_freq": 10000.0}
            extra |= {"sliding_window": 16, "sliding_window_pattern": 6}
            extra |= {"hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": 32}
        else:
            extra |= {"model_type": arch, "hidden_act": "silu"}
        return {"architectures": [_CLASS[arch]], **sizes, **extra}
    return {"architectures": [_CLASS[arch]], **sizes, **_v5_fields(arch)}


def _v5_fields(arch: str) -> dict[str, Any]:
    """What transformers 5.x writes beyond the sizes (checked against it in test_hparams)."""
    fields: dict[str, Any] = {
        "model_type": "gemma3_text" if arch == "gemma3" else arch,
        "transformers_version": "5.24.0",
        "rms_norm_eps": 1e-06,
        "attention_bias": False,
        "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"},
    }
    if arch != "gemma3":
        fields["hidden_act"] = "silu"
    if arch in ("qwen2", "qwen3"):
        fields |= {"use_sliding_window": False, "sliding_window": None, "max_window_layers": 28}
        fields["layer_types"] = ["full_attention"] * N_LAYERS
    if arch == "gemma3":
        fields["rope_parameters"] = {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
        }
        fields |= {"hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": 256}
        fields |= {"sliding_window": 16, "_sliding_window_pattern": 6}
        fields |= {"final_logit_softcapping": None, "attn_logit_softcapping": None}
        fields["layer_types"] = ["sliding_attention"] * N_LAYERS
    return fields


def transformers_config(arch: str, *, tied: bool) -> dict[str, Any]:
    """The same config written by the installed transformers (the oracle; slow import)."""
    import transformers

    cls = {
        "llama": transformers.LlamaConfig,
        "qwen2": transformers.Qwen2Config,
        "qwen3": transformers.Qwen3Config,
        "gemma3": transformers.Gemma3TextConfig,
    }[arch]
    sizes = {k: v for k, v in hf_config(arch, tied=tied).items() if k in _SIZE_KEYS}
    kwargs = {"sliding_window": 16} if arch == "gemma3" else {}
    config = cls(**sizes, **kwargs).to_dict()
    config["architectures"] = [_CLASS[arch]]
    return config


_SIZE_KEYS = (
    "num_hidden_layers",
    "hidden_size",
    "intermediate_size",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "vocab_size",
    "max_position_embeddings",
    "tie_word_embeddings",
)


def hf_tensors(arch: str, *, tied: bool, dtype: str = "bfloat16") -> dict[str, torch.Tensor]:
    """Random weights with Hugging Face names and (out, in) shapes."""
    import torch

    gen = torch.Generator().manual_seed(0)
    q_dim, kv_dim = N_HEADS * HEAD_DIM, N_KV * HEAD_DIM
    shapes: dict[str, tuple[int, ...]] = {
        "model.embed_tokens.weight": (VOCAB, HIDDEN),
        "model.norm.weight": (HIDDEN,),
    }
    if not tied:
        shapes["lm_head.weight"] = (VOCAB, HIDDEN)
    for i in range(N_LAYERS):
        p = f"model.layers.{i}."
        shapes |= {
            p + "input_layernorm.weight": (HIDDEN,),
            p + "self_attn.q_proj.weight": (q_dim, HIDDEN),
            p + "self_attn.k_proj.weight": (kv_dim, HIDDEN),
            p + "self_attn.v_proj.weight": (kv_dim, HIDDEN),
            p + "self_attn.o_proj.weight": (HIDDEN, q_dim),
            p + "post_attention_layernorm.weight": (HIDDEN,),
            p + "mlp.gate_proj.weight": (FFN, HIDDEN),
            p + "mlp.up_proj.weight": (FFN, HIDDEN),
            p + "mlp.down_proj.weight": (HIDDEN, FFN),
        }
        if arch == "qwen2":
            shapes |= {
                p + "self_attn.q_proj.bias": (q_dim,),
                p + "self_attn.k_proj.bias": (kv_dim,),
            }
            shapes |= {p + "self_attn.v_proj.bias": (kv_dim,)}
        if arch in ("qwen3", "gemma3"):
            shapes |= {
                p + "self_attn.q_norm.weight": (HEAD_DIM,),
                p + "self_attn.k_norm.weight": (HEAD_DIM,),
            }
        if arch == "gemma3":
            shapes |= {p + "pre_feedforward_layernorm.weight": (HIDDEN,)}
            shapes |= {p + "post_feedforward_layernorm.weight": (HIDDEN,)}
    return {n: torch.randn(s, generator=gen).to(getattr(torch, dtype)) for n, s in shapes.items()}


def _write_tokenizer(folder: Path, with_template: bool) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2} | {chr(ord("a") + i): 3 + i for i in range(26)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(folder / "tokenizer.json"))
    config: dict[str, Any] = {"bos_token": "<s>", "eos_token": "</s>"}
    if with_template:
        config["chat_template"] = TEMPLATE
    (folder / "tokenizer_config.json").write_text(json.dumps(config))


def write_tiny_hf(
    folder: Path,
    arch: str = "llama",
    *,
    tied: bool | None = None,
    n_shards: int = 1,
    legacy_config: bool = False,
    chat_template: bool = True,
) -> Path:
    """Write a complete tiny HF folder; n_shards > 1 adds model.safetensors.index.json."""
    tied = arch == "gemma3" if tied is None else tied
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(
        json.dumps(hf_config(arch, tied=tied, legacy=legacy_config))
    )
    (folder / "generation_config.json").write_text(
        json.dumps({"do_sample": False, "eos_token_id": 2})
    )
    _write_tokenizer(folder, chat_template)
    from safetensors.torch import save_file

    tensors = hf_tensors(arch, tied=tied)
    if n_shards == 1:
        save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
        return folder
    names = list(tensors)
    weight_map: dict[str, str] = {}
    for k in range(n_shards):
        shard = f"model-{k + 1:05d}-of-{n_shards:05d}.safetensors"
        part = {n: tensors[n] for n in names[k::n_shards]}
        save_file(part, str(folder / shard), metadata={"format": "pt"})
        weight_map |= {n: shard for n in part}
    index = {"metadata": {"total_size": 0}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    return folder
