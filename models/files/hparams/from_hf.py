"""ModelHParams from a Hugging Face config.json (llama, mistral, qwen2, qwen3, qwen3_moe, gemma3,
phi3, gemma2, smollm3, ministral3 / mistral3).

Reads both config generations: transformers 4.x (`rope_theta`, `rope_scaling`,
`rope_local_base_freq`, `sliding_window_pattern`) and 5.x (`rope_parameters`, per layer type for
gemma3, and `layer_types`), and Gemma 3's multimodal configs (the text model in `text_config`).

A key that is absent takes the value transformers' config class gives it (families.py), so a
config means here what it means there: a gemma3 config without `rope_local_base_freq` rotates
its sliding layers with base 10000, as Gemma3TextConfig's default does. Every value is read
through Fields: a wrong type or range is one ModelFileError naming the file and the field.
"""

from __future__ import annotations

from typing import Any

from ember.models.errors import ModelFileError
from ember.models.files.fields import REQUIRED, Fields, built
from ember.models.files.hparams.families import ARCH_BY_CLASS, FAMILIES, Family
from ember.models.files.hparams.hf_rope import rope_fields, rotary_fields
from ember.models.files.hparams.hparams import (
    MAX_CONTEXT,
    MAX_DIM,
    MAX_LAYERS,
    ModelHParams,
    sliding_pattern,
)

_ACT = {"silu": "silu", "gelu_pytorch_tanh": "gelu_tanh", "gelu_tanh": "gelu_tanh"}
_LAYER_TYPES = ("sliding_attention", "full_attention")


def hf_architecture(config: dict[str, Any], source: str = "config.json") -> str:
    """Our architecture name for a config.json, or its own name when we do not implement it."""
    family = _family_name(Fields(config, source))
    if family is not None:
        return FAMILIES[family].arch
    classes = config.get("architectures")
    if isinstance(classes, list) and classes and isinstance(classes[0], str) and classes[0]:
        return classes[0]
    model_type = config.get("model_type")
    if isinstance(model_type, str) and model_type:
        return model_type
    raise ModelFileError(f"{source}: names no architecture (architectures / model_type)")


def _family_name(f: Fields) -> str | None:
    """The transformers config family (a FAMILIES key), None when we do not know it."""
    for i, cls in enumerate(f.array("architectures") or []):
        name = f.item_string("architectures", i, cls)
        if name in ARCH_BY_CLASS:
            return ARCH_BY_CLASS[name]
    model_type = f.opt_string("model_type")
    return model_type if model_type in FAMILIES else None


def _text_fields(config: Fields, family: str) -> tuple[Fields, Family]:
    """The fields that describe the decoder: text_config for multimodal gemma3."""
    if not FAMILIES[family].multimodal:
        if config.has("text_config"):
            raise config.error("text_config", "multimodal checkpoints are not supported")
        return config, FAMILIES[family]
    text = config.object("text_config") or Fields({}, config.source, "text_config.")
    text_type = text.string("model_type", FAMILIES[family].text_family)
    if text_type not in FAMILIES or FAMILIES[text_type].multimodal:
        raise text.error("model_type", f"unsupported text model {text_type!r}")
    return text, FAMILIES[text_type]


def _layer_sliding(f: Fields, fam: Family, n_layers: int) -> list[bool] | None:
    """Which layers slide, from layer_types or the family's rule (None: no per-layer rule)."""
    types = f.array("layer_types")
    if types is not None:
        if len(types) != n_layers:
            raise f.error("layer_types", f"has {len(types)} entries for {n_layers} layers")
        return [
            f.item_string("layer_types", i, t, _LAYER_TYPES) == "sliding_attention"
            for i, t in enumerate(types)
        ]
    if fam.sliding == "flag":  # qwen3_moe: every layer or none
        return [f.boolean("use_sliding_window", False)] * n_layers
    if fam.sliding == "switch":  # qwen: use_sliding_window, then layers from max_window_layers
        if not f.boolean("use_sliding_window", False):
            return [False] * n_layers
        first = f.integer("max_window_layers", 28, hi=MAX_LAYERS)
        return [i >= first for i in range(n_layers)]
    return None


def _sliding(f: Fields, fam: Family, n_layers: int) -> tuple[int | None, int | None]:
    """(sliding_window, every-Nth-layer-global pattern) as transformers sets them up."""
    if fam.sliding == "none":
        return None, None
    if fam.sliding == "refused":
        if f.boolean("use_sliding_window", False):
            raise f.error("use_sliding_window", f"sliding layers of {fam.arch} are not supported")
        return None, None
    window = f.opt_integer("sliding_window", fam.sliding_window, lo=1, hi=MAX_CONTEXT)
    declared = f.opt_integer("_sliding_window_pattern", fam.sliding_pattern, lo=1, hi=MAX_LAYERS)
    declared = f.opt_integer("sliding_window_pattern", declared, lo=1, hi=MAX_LAYERS)
    sliding = _layer_sliding(f, fam, n_layers)
    if window is None or (sliding is not None and not any(sliding)):
        return None, None
    if sliding is None:  # gemma3's every-Nth-global pattern, or every layer (mistral)
        return window, declared
    pattern = sliding_pattern(sliding, declared)
    if pattern is None and not all(sliding):
        raise f.error("layer_types", "irregular sliding pattern (not every Nth layer global)")
    return window, pattern


def _sizes(f: Fields, fam: Family) -> dict[str, int]:
    def size(key: str, hi: int = MAX_DIM, default: int | None = None) -> int:
        return f.integer(key, fam.sizes.get(key, default or REQUIRED), lo=1, hi=hi)

    n_heads = size("num_attention_heads")
    hidden = size("hidden_size")
    head_dim = fam.head_dim or hidden // n_heads
    if not head_dim and not f.has("head_dim"):
        raise f.error("hidden_size", f"{hidden} is smaller than num_attention_heads ({n_heads})")
    return {
        "n_layers": size("num_hidden_layers", hi=MAX_LAYERS),
        "hidden_size": hidden,
        "ffn_size": size("intermediate_size"),
        "n_heads": n_heads,
        "n_kv_heads": size("num_key_value_heads", default=fam.kv_heads or n_heads),
        "head_dim": f.integer("head_dim", head_dim or REQUIRED, lo=1, hi=MAX_DIM),
        "vocab_size": size("vocab_size"),
    }


def _experts(f: Fields, fam: Family) -> dict[str, Any]:
    """qwen3_moe's expert fields (transformers' defaults); only layouts where every layer is a
    MoE layer are supported (decoder_sparse_step 1, no mlp_only_layers): the name says why."""
    if not fam.moe:
        return {}
    if f.integer("decoder_sparse_step", 1, lo=1, hi=MAX_LAYERS) != 1:
        raise f.error("decoder_sparse_step", "dense layers between MoE layers are not supported")
    if f.array("mlp_only_layers"):
        raise f.error("mlp_only_layers", "dense layers between MoE layers are not supported")
    count_key = "num_experts" if f.has("num_experts") else "num_local_experts"  # 5.x saves the 2nd
    n_experts = f.integer(count_key, 128, lo=1, hi=MAX_DIM)
    used = f.integer("num_experts_per_tok", 8, lo=1, hi=MAX_DIM)
    if used > n_experts:
        raise f.error("num_experts_per_tok", f"{used} is more than {count_key} {n_experts}")
    return {
        "n_experts": n_experts,
        "n_experts_used": used,
        "expert_ffn_size": f.integer("moe_intermediate_size", 768, lo=1, hi=MAX_DIM),
        "norm_topk_prob": f.boolean("norm_topk_prob", False),
    }


def from_hf_config(config: dict[str, Any], source: str = "config.json") -> ModelHParams:
    """ModelHParams from a config.json dict; ModelFileError names source and the bad field."""
    outer = Fields(config, source)
    family = _family_name(outer)
    if family is None:
        arch = hf_architecture(config, source)
        raise ModelFileError(f"{source}: architecture {arch!r} is not supported")
    f, fam = _text_fields(outer, family)
    if f.boolean("use_bidirectional_attention", False):
        raise f.error("use_bidirectional_attention", "bidirectional models are not supported")
    sizes = _sizes(f, fam)
    context = f.integer("max_position_embeddings", fam.context, lo=1, hi=MAX_CONTEXT)
    theta, scaling, local_theta, rope = rope_fields(f, fam, context)
    window, pattern = _sliding(f, fam, sizes["n_layers"])
    act_key = "hidden_activation" if fam.arch in ("gemma2", "gemma3") else "hidden_act"
    attention_bias = fam.reads_attention_bias and f.boolean("attention_bias", False)
    tied = f.boolean("tie_word_embeddings", fam.tie)
    return built(
        source,
        ModelHParams,
        architecture=fam.arch,
        **sizes,
        head_dim_v=sizes["head_dim"],
        context_length=context,
        rope_theta=theta,
        norm_eps=f.number("rms_norm_eps", 1e-6, positive=True, hi=1.0),
        rope_scaling=scaling,
        rope_local_theta=local_theta,
        sliding_window=window,
        sliding_window_pattern=pattern if window is not None else None,
        attn_logit_softcap=f.opt_number("attn_logit_softcapping", fam.attn_softcap, positive=True),
        final_logit_softcap=f.opt_number(
            "final_logit_softcapping", fam.final_softcap, positive=True
        ),
        tie_embeddings=outer.boolean("tie_word_embeddings", tied) if f is not outer else tied,
        qkv_bias=fam.arch == "qwen2" or attention_bias,
        attn_output_bias=attention_bias,
        mlp_bias=fam.reads_mlp_bias and f.boolean("mlp_bias", False),
        qk_norm=fam.arch in ("qwen3", "qwen3moe", "gemma3"),
        query_pre_attn_scalar=f.opt_number(
            "query_pre_attn_scalar", fam.query_pre_attn_scalar, positive=True, hi=1e9
        ),
        hidden_act=_ACT[f.string(act_key, fam.act, choices=tuple(_ACT))],
        norm_weight_offset=fam.norm_offset,
        rope_interleaved=False,
        **rotary_fields(f, rope, fam, sizes, scaling),
        **_experts(f, fam),
    )
