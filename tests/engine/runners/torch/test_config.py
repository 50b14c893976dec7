"""The runner's config is a mapping of ModelHParams: every valid description maps, and its RoPE
tables are finite (no division by zero, no overflow), whatever the config.json said."""

from __future__ import annotations

import math
from typing import Any

import torch
from hypothesis import HealthCheck, given, settings

from ember.engine.runners.torch.arch import ARCHS, arch_spec
from ember.engine.runners.torch.config import model_config
from ember.engine.runners.torch.layers.rope import Rope
from ember.models.errors import ModelFileError
from ember.models.files.hparams.from_hf import from_hf_config
from ember.models.files.hparams.hparams import SUPPORTED_ARCHS
from tests.fixtures.quick_hf import hf_config
from tests.models.files.metadata_strategies import config_edits


def test_runner_builds_every_architecture_the_description_supports() -> None:
    assert set(ARCHS) == set(SUPPORTED_ARCHS)


def test_gemma3_mapping() -> None:
    hp = from_hf_config(hf_config("gemma3", tied=True))
    cfg = model_config(hp, arch_spec(hp.architecture, "m"))
    assert cfg.sandwich_norms and cfg.embed_scale == math.sqrt(hp.hidden_size)
    assert cfg.norm_offset == 1.0 and cfg.activation == "gelu_tanh" and cfg.tie_embeddings
    assert cfg.layer_sliding == (True, True) and cfg.sliding_window == 16
    assert cfg.rope_local is not None and cfg.rope_local.theta == 10000.0
    assert cfg.rope.theta == 1e6 and cfg.rope.kind == "none"
    assert cfg.scale == 256**-0.5 and not cfg.unpermute_qk


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(config=config_edits())
def test_every_valid_description_maps_to_finite_rope_tables(config: dict[str, Any]) -> None:
    try:
        hp = from_hf_config(config)
    except ModelFileError:
        return
    cfg = model_config(hp, arch_spec(hp.architecture, "m"))
    if cfg.head_dim > 4096:
        return  # a valid but huge head: its table costs memory, not correctness
    positions = torch.tensor([0, 1, 7, hp.context_length - 1, 10 * hp.context_length])
    for layer in {0, cfg.n_layers - 1}:
        rope = Rope(cfg.rope_of(layer), cfg.rope_dim, torch.device("cpu"))
        cos, sin = rope.cos_sin(positions)
        assert torch.isfinite(cos).all() and torch.isfinite(sin).all()
        assert math.isfinite(rope.attn_factor) and rope.attn_factor > 0
