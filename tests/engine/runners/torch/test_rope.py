"""RoPE frequencies against transformers' definitions, and the rotation's basic algebra."""

from __future__ import annotations

import pytest
import torch

from ember.engine.runners.torch.arch import ARCHS
from ember.engine.runners.torch.config import RopeParams, model_config
from ember.engine.runners.torch.layers.rope import Rope, apply_rope, inv_freq_for
from ember.models.files.hparams.from_hf import from_hf_config

HEAD_DIM = 64

CASES = {
    "default": {"rope_type": "default", "rope_theta": 10000.0},
    "linear": {"rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0},
    "llama3": {
        "rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 8192,
    },
    "yarn": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 2048},
    "dynamic": {"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0},
}  # fmt: skip


def _ours(params: dict, generation: str) -> RopeParams:
    """The runner's RoPE for a llama config.json carrying params, read the one real way:
    models/files' description, then the runner's mapping of it."""
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 1,
        "hidden_size": HEAD_DIM * 4, "intermediate_size": 512, "num_attention_heads": 4,
        "vocab_size": 10, "max_position_embeddings": 2048,
    }  # fmt: skip
    if generation == "5.x":
        config["rope_parameters"] = dict(params)
    else:  # 4.x: rope_theta beside a rope_scaling object (null without scaling)
        scaling = {k: v for k, v in params.items() if k != "rope_theta"}
        config["rope_theta"] = params["rope_theta"]
        config["rope_scaling"] = None if scaling["rope_type"] == "default" else scaling
    return model_config(from_hf_config(config), ARCHS["llama"]).rope


@pytest.mark.parametrize("generation", ["5.x", "4.x"])
@pytest.mark.parametrize("kind", sorted(CASES))
def test_inv_freq_matches_transformers(kind: str, generation: str) -> None:
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    params = CASES[kind]
    config = LlamaConfig(
        hidden_size=HEAD_DIM * 4,
        num_attention_heads=4,
        max_position_embeddings=2048,
        rope_parameters=dict(params),
    )
    seq_len = 5000 if kind == "dynamic" else None
    if kind == "default":
        theta = params["rope_theta"]
        assert isinstance(theta, float)
        expected = 1.0 / (theta ** (torch.arange(0, HEAD_DIM, 2).float() / HEAD_DIM))
        expected_factor = 1.0
    else:
        expected, expected_factor = ROPE_INIT_FUNCTIONS[kind](config, "cpu", seq_len=seq_len)
    got, factor = inv_freq_for(_ours(params, generation), HEAD_DIM, seq_len or 0)
    torch.testing.assert_close(got, expected.float(), rtol=1e-5, atol=1e-9)
    assert factor == pytest.approx(expected_factor)


def test_rotation_by_delta_equals_rotation_at_shifted_position() -> None:
    rope = Rope(RopeParams(theta=10000.0), HEAD_DIM, torch.device("cpu"))
    x = torch.randn(3, 2, HEAD_DIM)
    positions = torch.tensor([5, 9, 40])
    cos, sin = rope.cos_sin(positions)
    dcos, dsin = rope.shift_cos_sin(-4)
    shifted = apply_rope(apply_rope(x, cos, sin), dcos, dsin)
    cos2, sin2 = rope.cos_sin(positions - 4)
    torch.testing.assert_close(shifted, apply_rope(x, cos2, sin2), rtol=1e-4, atol=1e-5)
