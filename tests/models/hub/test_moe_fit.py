"""Fit estimates of a mixture of experts: total and active parameters, RAM with experts mmap'd
(one token's working set) against every expert resident."""

from __future__ import annotations

import json
from pathlib import Path

from ember.models.files.gguf import open_gguf
from ember.models.hub.fit import (
    HEADER_PEEK_BYTES,
    estimate,
    shape_from_config,
    shape_from_gguf_header,
)
from tests.fixtures.quick_gguf import EXPERT_FFN, HIDDEN, N_EXPERTS, N_EXPERTS_USED, write_tiny_gguf


def test_gguf_header_counts_the_tensors_of_the_file(tmp_path: Path) -> None:
    path = write_tiny_gguf(tmp_path / "moe.gguf", "qwen3moe", n_vocab=3000, tied=True)
    shape = shape_from_gguf_header(path.read_bytes()[:HEADER_PEEK_BYTES])
    assert shape is not None and shape.experts is not None
    experts = shape.experts
    assert (experts.count, experts.used, experts.width) == (N_EXPERTS, N_EXPERTS_USED, EXPERT_FFN)
    tensors = open_gguf(path).tensors
    in_layers = sum(
        t.n_elements for n, t in tensors.items() if n.startswith("blk.") and len(t.shape) > 1
    )
    assert experts.vocab == 0  # no vocab_size key: the token tables are left out, not guessed
    assert experts.total_params == in_layers
    per_expert = 3 * HIDDEN * EXPERT_FFN * 2  # 2 layers
    assert experts.total_params - experts.active_params == per_expert * (N_EXPERTS - N_EXPERTS_USED)


def test_dense_models_have_no_experts(tmp_path: Path) -> None:
    shape = shape_from_gguf_header(write_tiny_gguf(tmp_path / "d.gguf", "qwen3").read_bytes())
    assert shape is not None and shape.experts is None


def test_qwen3_30b_a3b_config_reads_as_its_model_card_says(tmp_path: Path) -> None:
    """Qwen3-30B-A3B's config.json sizes: 30.5B parameters, 3.3B activated (the model card)."""
    config = {
        "num_hidden_layers": 48, "hidden_size": 2048, "num_attention_heads": 32,
        "num_key_value_heads": 4, "head_dim": 128, "num_experts": 128,
        "num_experts_per_tok": 8, "moe_intermediate_size": 768, "vocab_size": 151936,
    }  # fmt: skip
    shape = shape_from_config(json.dumps(config))
    assert shape is not None and shape.experts is not None
    assert round(shape.experts.total_params / 1e9, 1) == 30.5
    assert 3.3 <= shape.experts.active_params / 1e9 < 3.4  # 3.35B (the card truncates)
    fit = estimate(17_300_000_000, shape, 4096, 0, tmp_path)  # a Q4_K_M's size
    assert fit.ram_working_set_bytes < fit.ram_needed_bytes / 4
    assert fit.to_dict()["moe"] == shape.experts.to_dict()
