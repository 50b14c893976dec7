"""Mixture-of-experts fields of ModelHParams: from GGUF metadata, from a qwen3_moe config.json,
and the bad values a file can carry (each one line naming the field)."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest

from ember.models.errors import ModelFileError
from ember.models.files.hparams.from_gguf import from_gguf
from ember.models.files.hparams.from_hf import from_hf_config
from ember.models.files.hparams.tensors import HFNames, check_tensor_shapes, expected_tensors

HF_MOE: dict[str, Any] = {
    "architectures": ["Qwen3MoeForCausalLM"],
    "model_type": "qwen3_moe",
    "num_hidden_layers": 2,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "vocab_size": 100,
    "num_experts": 8,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 32,
    "norm_topk_prob": True,
}


def _gguf_md(**extra: object) -> dict[str, object]:
    return {
        "general.architecture": "qwen3moe",
        "qwen3moe.block_count": 2,
        "qwen3moe.context_length": 512,
        "qwen3moe.embedding_length": 64,
        "qwen3moe.feed_forward_length": 128,
        "qwen3moe.attention.head_count": 4,
        "qwen3moe.attention.head_count_kv": 2,
        "qwen3moe.attention.layer_norm_rms_epsilon": 1e-6,
        "qwen3moe.expert_count": 8,
        "qwen3moe.expert_used_count": 2,
        "qwen3moe.expert_feed_forward_length": 32,
    } | extra


def test_gguf_and_hf_describe_the_same_moe() -> None:
    gguf = from_gguf(_gguf_md(), 100, {"blk.0.attn_q_norm.weight": (16,), "output.weight": ()})
    hf = from_hf_config(HF_MOE)
    assert (gguf.n_experts, gguf.n_experts_used, gguf.expert_ffn_size) == (8, 2, 32)
    assert gguf.norm_topk_prob and hf.norm_topk_prob  # llama.cpp always renormalises qwen3moe
    for name in ("n_experts", "n_experts_used", "expert_ffn_size", "is_moe", "qk_norm"):
        assert getattr(gguf, name) == getattr(hf, name), name


def test_hf_reads_transformers_5_spelling_of_the_expert_count() -> None:
    config = {k: v for k, v in HF_MOE.items() if k != "num_experts"} | {"num_local_experts": 6}
    assert from_hf_config(config).n_experts == 6


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        ({"qwen3moe.expert_count": 0}, "qwen3moe.expert_count: must be in 1.."),
        ({"qwen3moe.expert_used_count": 9}, "expert_used_count: 9 is more than expert_count 8"),
        ({"qwen3moe.expert_feed_forward_length": 0}, "expert_feed_forward_length: must be in 1"),
    ],
)
def test_gguf_bad_expert_metadata(extra: dict[str, object], fragment: str) -> None:
    with pytest.raises(ModelFileError, match=re.escape(fragment)):
        from_gguf(_gguf_md(**extra), 100, {})


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"num_experts": 0}, "config.json: num_experts: must be in 1.."),
        ({"num_experts_per_tok": 9}, "num_experts_per_tok: 9 is more than num_experts 8"),
        ({"decoder_sparse_step": 2}, "decoder_sparse_step: dense layers between MoE layers"),
        ({"mlp_only_layers": [0]}, "mlp_only_layers: dense layers between MoE layers"),
    ],
)
def test_hf_bad_expert_config(change: dict[str, object], fragment: str) -> None:
    with pytest.raises(ModelFileError, match=re.escape(fragment)):
        from_hf_config(HF_MOE | change)


def test_description_refuses_inconsistent_expert_counts() -> None:
    hp = from_hf_config(HF_MOE)
    with pytest.raises(ModelFileError, match="^n_experts: must be > 0"):
        dataclasses.replace(hp, n_experts=0)
    with pytest.raises(ModelFileError, match="^n_experts_used: 3 experts per token but only 2"):
        dataclasses.replace(hp, n_experts=2, n_experts_used=3)
    with pytest.raises(ModelFileError, match="is not a mixture of experts"):
        dataclasses.replace(hp, architecture="qwen3")


def test_hf_checkpoint_needs_every_expert_in_shape() -> None:
    hp = from_hf_config(HF_MOE)
    names = HFNames()
    shapes = {}
    for gguf_name, exp in expected_tensors(hp).items():
        if "_exps" in gguf_name:
            layer = gguf_name.split(".")[1]
            proj = {"gate": "gate_proj", "up": "up_proj", "down": "down_proj"}[
                gguf_name.split(".")[2].split("_")[1]
            ]
            for e in range(hp.n_experts):
                shapes[f"model.layers.{layer}.mlp.experts.{e}.{proj}.weight"] = exp.shape[1:]
        elif exp.required:
            from ember.models.files.hparams.tensors import hf_tensor_name

            shapes[hf_tensor_name(gguf_name, hp.architecture, names)] = exp.shape
    check_tensor_shapes(hp, shapes, names)  # complete: no error
    del shapes["model.layers.1.mlp.experts.7.up_proj.weight"]
    with pytest.raises(ModelFileError, match=r"missing tensor model\.layers\.1\.mlp\.experts\.7"):
        check_tensor_shapes(hp, shapes, names)
    shapes["model.layers.1.mlp.experts.7.up_proj.weight"] = (31, 64)
    with pytest.raises(ModelFileError, match=r"experts\.7\.up_proj\.weight has shape \(31, 64\)"):
        check_tensor_shapes(hp, shapes, names)
