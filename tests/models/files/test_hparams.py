"""ModelHParams validation and its builders from GGUF metadata and HF config.json."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import pytest

from ember.models.errors import ModelFileError
from ember.models.files.hparams.from_gguf import from_gguf
from ember.models.files.hparams.from_hf import from_hf_config
from ember.models.files.hparams.hparams import (
    ModelHParams,
    RopeScaling,
)
from tests.fixtures.quick_hf import hf_config, transformers_config

BASE = ModelHParams(
    architecture="llama",
    n_layers=2,
    hidden_size=64,
    ffn_size=128,
    n_heads=4,
    n_kv_heads=2,
    head_dim=16,
    head_dim_v=16,
    vocab_size=100,
    context_length=512,
    rope_theta=10000.0,
    norm_eps=1e-5,
)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"n_layers": 0}, "n_layers"),
        ({"hidden_size": -1}, "hidden_size"),
        ({"n_heads": True}, "n_heads"),
        ({"n_kv_heads": 3}, "n_kv_heads"),
        ({"head_dim": 1 << 30}, "head_dim"),
        ({"n_layers": 100_000}, "n_layers"),
        ({"rope_theta": float("nan")}, "rope_theta"),
        ({"norm_eps": 0.0}, "norm_eps"),
        ({"final_logit_softcap": float("inf")}, "final_logit_softcap"),
        ({"sliding_window": 0}, "sliding_window"),
        ({"sliding_window_pattern": 6}, "sliding_window_pattern"),
        ({"hidden_act": "relu"}, "hidden_act"),
        ({"architecture": ""}, "architecture"),
    ],
)
def test_invalid_values_name_the_field(change: dict[str, Any], field: str) -> None:
    # Any: the values are of the wrong type on purpose; construction must refuse them
    with pytest.raises(ModelFileError, match=f"^{field}"):
        dataclasses.replace(BASE, **change)


def test_rope_scaling_validation() -> None:
    with pytest.raises(ModelFileError, match="rope_scaling.kind"):
        RopeScaling(kind="ntk-by-parts", factor=2.0)
    with pytest.raises(ModelFileError, match="longrope scaling needs original_context_length"):
        RopeScaling(kind="longrope", factor=2.0)
    with pytest.raises(ModelFileError, match="llama3"):
        RopeScaling(kind="llama3", factor=8.0, original_context_length=8192)
    with pytest.raises(ModelFileError, match="rope_scaling.factor"):
        RopeScaling(kind="linear", factor=-1.0)
    assert RopeScaling(kind="linear", factor=8.0).factor == 8.0


def test_attn_scale_and_dict() -> None:
    assert BASE.attn_scale == pytest.approx(16**-0.5)
    assert dataclasses.replace(BASE, query_pre_attn_scalar=256.0).attn_scale == pytest.approx(
        1 / 16
    )
    as_dict = BASE.to_dict()
    assert as_dict["rope_scaling"] == {**dataclasses.asdict(RopeScaling())}
    json.dumps(as_dict)


def _gguf_md(arch: str = "llama", **extra: object) -> dict[str, object]:
    md: dict[str, object] = {
        "general.architecture": arch,
        f"{arch}.block_count": 2,
        f"{arch}.embedding_length": 64,
        f"{arch}.feed_forward_length": 128,
        f"{arch}.attention.head_count": 4,
        f"{arch}.context_length": 4096,
        f"{arch}.attention.layer_norm_rms_epsilon": 1e-5,
    }
    return md | extra


def test_gguf_defaults_follow_llama_cpp() -> None:
    hp = from_gguf(_gguf_md(), 100, {"output.weight": (100, 64)})
    assert (hp.n_kv_heads, hp.head_dim, hp.head_dim_v, hp.rope_theta) == (4, 16, 16, 10000.0)
    assert hp.vocab_size == 100 and not hp.tie_embeddings and hp.rope_scaling.kind == "none"


def test_gguf_rope_scaling_and_softcaps() -> None:
    md = _gguf_md(
        "qwen2",
        **{
            "qwen2.rope.scaling.type": "yarn",
            "qwen2.rope.scaling.factor": 4.0,
            "qwen2.rope.scaling.original_context_length": 32768,
            "qwen2.final_logit_softcapping": 30.0,
            "qwen2.vocab_size": 77,
        },
    )
    hp = from_gguf(md, 100, {})
    assert hp.rope_scaling == RopeScaling(kind="yarn", factor=4.0, original_context_length=32768)
    assert hp.final_logit_softcap == 30.0 and hp.vocab_size == 77 and hp.tie_embeddings


def test_gguf_yarn_without_original_length_uses_the_trained_context() -> None:
    md = _gguf_md("llama", **{"llama.rope.scaling.type": "yarn", "llama.rope.scaling.factor": 4.0})
    scaling = from_gguf(md, 100, {}).rope_scaling
    assert (scaling.kind, scaling.original_context_length) == ("yarn", 4096)


def test_hf_mistral_sliding_window_covers_every_layer() -> None:
    config = hf_config("llama", tied=False, legacy=True)
    config |= {"architectures": ["MistralForCausalLM"], "model_type": "mistral"}
    hp = from_hf_config(config | {"sliding_window": 4096})
    assert hp.architecture == "llama" and hp.sliding_window == 4096
    assert hp.is_sliding(0) and hp.is_sliding(1)
    assert from_hf_config(config | {"sliding_window": None}).sliding_window is None


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        ({"llama.block_count": "two"}, "llama.block_count: must be an integer, got 'two'"),
        ({"llama.attention.head_count": [4, 4]}, "head_count: per-layer values"),
        ({"llama.attention.head_count": 0}, "llama.attention.head_count: must be in 1.."),
        ({"llama.rope.scaling.type": "ntk"}, "llama.rope.scaling.type: unsupported"),
        ({"llama.attention.layer_norm_rms_epsilon": "x"}, "epsilon: must be a number"),
        (
            {"llama.rope.scaling.factor": -2.0},
            "llama.rope.scaling.factor: must be in 0..1e+06, got -2.0",
        ),
        ({"llama.rope.freq_base": float("nan")}, "freq_base: must be a finite number"),
        ({"llama.context_length": True}, "context_length: must be an integer, got True"),
        ({"llama.block_count": 1 << 40}, "llama.block_count: must be in 1..4096"),
    ],
)
def test_gguf_bad_metadata(extra: dict[str, object], fragment: str) -> None:
    with pytest.raises(ModelFileError, match=re.escape(fragment)):
        from_gguf(_gguf_md("llama", **extra), 100, {})


def test_gguf_gemma3_pattern_from_bool_array() -> None:
    layers = [True, True, False, True, True, False]
    md = _gguf_md("gemma3", **{"gemma3.block_count": 6, "gemma3.attention.sliding_window": 512})
    md["gemma3.attention.sliding_window_pattern"] = layers
    hp = from_gguf(md, 100, {})
    assert hp.sliding_window_pattern == 3
    assert [hp.is_sliding(i) for i in range(6)] == layers


@pytest.mark.parametrize("legacy", [False, True])
@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen3", "gemma3"])
def test_hf_config_both_generations(arch: str, legacy: bool) -> None:
    hp = from_hf_config(hf_config(arch, tied=arch == "gemma3", legacy=legacy))
    assert hp.architecture == arch
    assert (hp.n_layers, hp.hidden_size, hp.ffn_size, hp.n_heads, hp.n_kv_heads) == (
        2,
        64,
        128,
        2,
        1,
    )
    assert (hp.head_dim, hp.vocab_size, hp.context_length) == (32, 40, 512)
    assert hp.qkv_bias == (arch == "qwen2") and hp.qk_norm == (arch in ("qwen3", "gemma3"))
    assert hp.norm_weight_offset == (1.0 if arch == "gemma3" else 0.0)
    if arch == "gemma3":
        assert hp.hidden_act == "gelu_tanh" and hp.tie_embeddings
        assert (hp.sliding_window, hp.sliding_window_pattern, hp.rope_local_theta) == (
            16,
            6,
            10000.0,
        )
        assert hp.query_pre_attn_scalar is not None
    else:
        assert hp.sliding_window is None and hp.hidden_act == "silu"
    if legacy:
        assert hp.rope_theta == 500000.0 or arch == "gemma3"


def test_hf_llama3_rope_scaling() -> None:
    config = hf_config("llama", tied=False, legacy=True)
    config["rope_scaling"] = {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    }
    scaling = from_hf_config(config).rope_scaling
    assert (scaling.kind, scaling.factor, scaling.original_context_length) == ("llama3", 8.0, 8192)
    assert (scaling.low_freq_factor, scaling.high_freq_factor) == (1.0, 4.0)


def test_hf_gemma3_per_layer_rope_parameters() -> None:
    config = hf_config("gemma3", tied=True)
    config["rope_parameters"]["full_attention"] = {
        "rope_type": "linear",
        "factor": 8.0,
        "rope_theta": 1e6,
    }
    hp = from_hf_config(config)
    assert hp.rope_scaling == RopeScaling(kind="linear", factor=8.0)
    assert (hp.rope_theta, hp.rope_local_theta) == (1e6, 10000.0)


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"num_hidden_layers": None}, "config.json: num_hidden_layers: missing"),
        ({"hidden_size": "64"}, "config.json: hidden_size: must be an integer, got '64'"),
        ({"architectures": None, "model_type": None}, "names no architecture"),
        ({"text_config": {}}, "multimodal"),
        ({"hidden_act": "relu"}, "config.json: hidden_act: unsupported 'relu'"),
    ],
)
def test_hf_bad_config(change: dict[str, object], fragment: str) -> None:
    config = hf_config("llama", tied=False, legacy=True) | change
    with pytest.raises(ModelFileError, match=re.escape(fragment)):
        from_hf_config(config)


@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen3", "gemma3"])
def test_fixture_configs_match_transformers(arch: str) -> None:
    """The hand-written 5.x configs read the same as the installed transformers' own."""
    ours = from_hf_config(hf_config(arch, tied=arch == "gemma3"))
    theirs = from_hf_config(transformers_config(arch, tied=arch == "gemma3"))
    assert ours == theirs


_SIZES = {
    "num_hidden_layers": 7,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "vocab_size": 40,
}
# (architectures, transformers config class, extra keys): configs that leave keys out
_MINIMAL: dict[str, tuple[str, str, dict[str, Any]]] = {
    "llama": ("LlamaForCausalLM", "LlamaConfig", {}),
    "llama_yarn": (
        "LlamaForCausalLM",
        "LlamaConfig",
        {"rope_scaling": {"rope_type": "yarn", "factor": 4.0}, "max_position_embeddings": 4096},
    ),
    "mistral": ("MistralForCausalLM", "MistralConfig", {}),
    "qwen2": ("Qwen2ForCausalLM", "Qwen2Config", {}),
    "qwen2_sliding": (
        "Qwen2ForCausalLM",
        "Qwen2Config",
        {"use_sliding_window": True, "max_window_layers": 0, "sliding_window": 32},
    ),
    "qwen3": ("Qwen3ForCausalLM", "Qwen3Config", {}),
    "gemma3": ("Gemma3ForCausalLM", "Gemma3TextConfig", {}),
}


# without num_key_value_heads: each family's own default (8, 32, 4 or all heads) must divide
_SIZES_NO_KV = {k: v for k, v in _SIZES.items() if k != "num_key_value_heads"} | {
    "hidden_size": 4096,
    "num_attention_heads": 32,
}


@pytest.mark.parametrize("sizes", [_SIZES, _SIZES_NO_KV], ids=["kv", "no_kv"])
@pytest.mark.parametrize("case", sorted(_MINIMAL))
def test_absent_keys_mean_what_transformers_defaults_to(case: str, sizes: dict) -> None:
    """A config with only the sizes reads the same as transformers' own full rendering of it."""
    import transformers

    cls_name, config_cls, extra = _MINIMAL[case]
    minimal = {"architectures": [cls_name], **sizes, **extra}
    full = getattr(transformers, config_cls)(**sizes, **extra).to_dict()
    full["architectures"] = [cls_name]
    assert from_hf_config(minimal) == from_hf_config(full)


def test_gemma3_defaults_are_transformers_not_the_global_base() -> None:
    """Gemma3TextConfig: sliding layers rotate with base 10000, global ones with 1e6, a window of
    4096 on five layers of six, attention scaled by 256 ** -0.5, whatever the file leaves out."""
    hp = from_hf_config({"architectures": ["Gemma3ForCausalLM"], **_SIZES})
    assert (hp.rope_local_theta, hp.rope_theta) == (10000.0, 1_000_000.0)
    assert (hp.sliding_window, hp.sliding_window_pattern, hp.head_dim) == (4096, 6, 256)
    assert hp.attn_scale == 256**-0.5 and hp.tie_embeddings and hp.hidden_act == "gelu_tanh"
    assert [hp.layer_rope_theta(i) for i in (0, 5, 6)] == [10000.0, 1e6, 10000.0]


def test_multimodal_gemma3_reads_its_text_config() -> None:
    text = hf_config("gemma3", tied=True)
    outer = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3"}
    assert from_hf_config(outer | {"text_config": text}) == from_hf_config(text)
    with pytest.raises(ModelFileError, match=r"text_config\.model_type: unsupported"):
        from_hf_config(outer | {"text_config": text | {"model_type": "siglip"}})


@pytest.mark.parametrize(
    ("scaling", "fragment"),
    [
        ({"rope_type": "linear", "factor": 0}, "rope_scaling.factor: must be > 0, got 0"),
        ({"rope_type": "linear", "factor": "2"}, "rope_scaling.factor: must be a number"),
        ({"rope_type": "linear"}, "rope_scaling.factor: missing"),
        ({"rope_type": ["linear"]}, "rope_scaling.rope_type: must be a string"),
        (
            {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4.0, "high_freq_factor": 4.0},
            "high_freq_factor: must be > low_freq_factor",
        ),
        ({"rope_type": "llama3", "factor": 8.0}, "llama3 scaling needs low_freq_factor"),
        ({"rope_type": "yarn", "factor": 4.0, "beta_fast": -1}, "beta_fast: must be > 0"),
        ([1, 2], "rope_scaling: must be an object, got [1, 2]"),
    ],
)
def test_bad_rope_scaling_is_one_line(scaling: object, fragment: str) -> None:
    config = hf_config("llama", tied=False, legacy=True) | {"rope_scaling": scaling}
    with pytest.raises(ModelFileError, match=re.escape(fragment)) as info:
        from_hf_config(config, "m/config.json")
    assert str(info.value).startswith("m/config.json: ")


def test_gguf_scaling_factor_without_type_is_linear_as_in_llama_cpp() -> None:
    assert from_gguf(
        _gguf_md("llama", **{"llama.rope.scaling.factor": 4.0}), 100, {}
    ).rope_scaling == (RopeScaling(kind="linear", factor=4.0))
    legacy = from_gguf(_gguf_md("llama", **{"llama.rope.scale_linear": 2.0}), 100, {})
    assert legacy.rope_scaling == RopeScaling(kind="linear", factor=2.0)
    unscaled = from_gguf(_gguf_md("llama", **{"llama.rope.scaling.factor": 0.0}), 100, {})
    assert unscaled.rope_scaling == RopeScaling()  # llama.cpp: 0 means "not set"


def test_biases_follow_the_config() -> None:
    config = hf_config("llama", tied=False, legacy=True)
    hp = from_hf_config(config | {"attention_bias": True, "mlp_bias": True})
    assert hp.qkv_bias and hp.attn_output_bias and hp.mlp_bias
    qwen2 = from_hf_config(hf_config("qwen2", tied=False) | {"attention_bias": True})
    assert qwen2.qkv_bias and not qwen2.attn_output_bias  # qwen2: q/k/v biases, never o's
