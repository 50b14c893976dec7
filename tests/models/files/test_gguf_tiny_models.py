"""open_gguf and open_safetensors on the shared tiny models (converted by llama.cpp's own tools).

The GGUF files come from real conversion and llama.cpp quantization, so this checks that our
readers agree with the converter: the same hyperparameters from config.json and from GGUF
metadata, and the same weights on both sides.
"""

from __future__ import annotations

import dataclasses
import math

import gguf
import numpy as np
import pytest

from ember.models.files.gguf import open_gguf
from ember.models.files.hparams.rope import RopeScaling
from ember.models.files.inspect import inspect_model
from ember.models.files.safetensors import open_safetensors
from tests.fixtures.tiny_models import ARCHS, QTYPES, TinyModels

# fields that legitimately differ between the two sources (see models/files/hparams/hparams.py)
_SOURCE_SPECIFIC = {"norm_weight_offset", "rope_interleaved", "norm_eps", "query_pre_attn_scalar"}


@pytest.mark.parametrize("arch", ARCHS)
def test_gguf_and_hf_hparams_agree(arch: str, tiny_models: TinyModels) -> None:
    hf = open_safetensors(tiny_models.hf_dir(arch)).check_supported()
    for qtype in QTYPES:
        model = open_gguf(tiny_models.gguf(arch, qtype))
        hp = model.check_supported()
        for f in dataclasses.fields(hp):
            ours, theirs = getattr(hp, f.name), getattr(hf, f.name)
            if f.name == "rope_scaling" and ours.kind == "longrope":
                _same_longrope(ours, theirs)
            elif f.name in _SOURCE_SPECIFIC:
                continue
            elif isinstance(ours, float):  # GGUF stores float32
                assert ours == pytest.approx(theirs, rel=1e-6), (qtype, f.name)
            else:
                assert ours == theirs, (qtype, f.name)
        assert hp.norm_eps == pytest.approx(hf.norm_eps, rel=1e-6)
        assert hp.attn_scale == pytest.approx(hf.attn_scale)
        info = inspect_model(tiny_models.gguf(arch, qtype))
        assert info.quant == qtype and info.supported


def _same_longrope(gguf_scaling: RopeScaling, hf_scaling: RopeScaling) -> None:
    """LongRoPE in GGUF: the factor lists are tensors and the attention factor is llama.cpp's
    multiplier (phi3's converter writes it); in config.json: lists, and transformers' default
    factor sqrt(1 + ln(factor) / ln(original)). Both mean the same RoPE."""
    assert gguf_scaling.original_context_length == hf_scaling.original_context_length
    assert gguf_scaling.factor == pytest.approx(hf_scaling.factor)
    assert not gguf_scaling.long_factor and len(hf_scaling.long_factor) > 0
    original, factor = hf_scaling.original_context_length or 0, hf_scaling.factor
    default = math.sqrt(1 + math.log(factor) / math.log(original))
    assert hf_scaling.attn_factor is None and gguf_scaling.attn_factor == 1.0
    assert gguf_scaling.attn_multiplier == pytest.approx(default, rel=1e-6)


@pytest.mark.parametrize("arch", ["qwen2", "qwen3"])
def test_f32_weights_equal_the_checkpoint(arch: str, tiny_models: TinyModels) -> None:
    """Same orientation and bytes: GGUF raw F32 (ne reversed) == HF tensor (no permutation)."""
    model = open_gguf(tiny_models.gguf(arch, "F32"))
    hf = open_safetensors(tiny_models.hf_dir(arch))
    pairs = {
        "blk.1.ffn_down.weight": "model.layers.1.mlp.down_proj.weight",
        "blk.0.attn_v.weight": "model.layers.0.self_attn.v_proj.weight",
        "token_embd.weight": "model.embed_tokens.weight",
    }
    for gguf_name, hf_name in pairs.items():
        t = model.tensors[gguf_name]
        assert t.qtype == gguf.GGMLQuantizationType.F32
        got = t.raw.view(np.float32).reshape(t.shape)
        want = hf.tensor(hf_name).float().numpy()
        np.testing.assert_array_equal(got, want)
