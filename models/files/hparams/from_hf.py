"""ModelHParams from a Hugging Face config.json (llama, qwen2, qwen3, gemma3_text).

Reads both config generations: transformers 4.x (`rope_theta`, `rope_scaling`,
`rope_local_base_freq`, `sliding_window_pattern`) and 5.x (`rope_parameters`, per layer type for
gemma3, and `layer_types`).
"""

from __future__ import annotations

from typing import Any

from ember.models.errors import ModelFileError
from ember.models.files.hparams.hparams import ModelHParams, RopeScaling

# HF class / model_type -> our architecture name (GGUF's spelling)
_ARCH_BY_CLASS = {
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "llama",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
    "Gemma3ForCausalLM": "gemma3",
}
_ARCH_BY_TYPE = {
    "llama": "llama",
    "mistral": "llama",
    "qwen2": "qwen2",
    "qwen3": "qwen3",
    "gemma3_text": "gemma3",
}
_ACT = {"silu": "silu", "gelu_pytorch_tanh": "gelu_tanh", "gelu_tanh": "gelu_tanh"}


def hf_architecture(config: dict[str, Any]) -> str:
    """Our architecture name for a config.json, or its own name when we do not implement it."""
    classes = config.get("architectures") or []
    for cls in classes if isinstance(classes, list) else []:
        if cls in _ARCH_BY_CLASS:
            return _ARCH_BY_CLASS[cls]
    model_type = config.get("model_type")
    if isinstance(model_type, str) and model_type in _ARCH_BY_TYPE:
        return _ARCH_BY_TYPE[model_type]
    if classes and isinstance(classes, list) and isinstance(classes[0], str):
        return classes[0]
    if isinstance(model_type, str) and model_type:
        return model_type
    raise ModelFileError("config.json names no architecture (architectures / model_type)")


def _get(config: dict[str, Any], key: str, kind: type, default: Any = None) -> Any:
    value = config.get(key, default)
    if value is None:
        if default is None:
            raise ModelFileError(f"config.json: {key} is missing")
        return default
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if isinstance(value, bool) != (kind is bool) or not isinstance(value, kind):
        raise ModelFileError(f"config.json: {key} must be {kind.__name__}, got {value!r}")
    return value


def _rope_params(config: dict[str, Any], arch: str) -> tuple[float, dict[str, Any], float | None]:
    """(global theta, global scaling dict, local theta) from either config generation."""
    params = config.get("rope_parameters")
    if isinstance(params, dict) and "full_attention" in params:  # 5.x per layer type (gemma3)
        full = params["full_attention"] or {}
        local = params.get("sliding_attention") or {}
        theta = float(full.get("rope_theta", 10000.0))
        return theta, full, float(local["rope_theta"]) if "rope_theta" in local else None
    if isinstance(params, dict):  # 5.x single
        return float(params.get("rope_theta", 10000.0)), params, None
    theta = float(_get(config, "rope_theta", float, 10000.0))
    scaling = config.get("rope_scaling") or {}
    if not isinstance(scaling, dict):
        raise ModelFileError("config.json: rope_scaling must be an object")
    local_theta = config.get("rope_local_base_freq", 10000.0 if arch == "gemma3" else None)
    return theta, scaling, float(local_theta) if local_theta is not None else None


def _rope_scaling(scaling: dict[str, Any], context_length: int) -> RopeScaling:
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind in ("default", None, "none"):
        return RopeScaling()
    if kind not in ("linear", "yarn", "llama3", "dynamic"):
        raise ModelFileError(f"config.json: unsupported rope scaling {kind!r}")
    orig = scaling.get("original_max_position_embeddings")
    if orig is None and kind in ("yarn", "llama3"):
        factor = float(scaling.get("factor", 1.0))
        orig = int(context_length / factor)
    return RopeScaling(
        kind=kind,
        factor=float(scaling.get("factor", 1.0)),
        original_context_length=int(orig) if orig is not None else None,
        low_freq_factor=_opt_float(scaling.get("low_freq_factor")),
        high_freq_factor=_opt_float(scaling.get("high_freq_factor")),
        beta_fast=_opt_float(scaling.get("beta_fast")),
        beta_slow=_opt_float(scaling.get("beta_slow")),
        attn_factor=_opt_float(scaling.get("attention_factor")),
    )


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _sliding(config: dict[str, Any], arch: str, n_layers: int) -> tuple[int | None, int | None]:
    """(sliding_window, every-Nth-global pattern)."""
    window = config.get("sliding_window")
    if arch == "qwen2" or arch == "qwen3":
        if not config.get("use_sliding_window", False):
            return None, None
    if window is None:  # llama configs have none; mistral v0.1 sets one for every layer
        return None, None
    layer_types = config.get("layer_types")
    if isinstance(layer_types, list) and len(layer_types) == n_layers:
        sliding = [t == "sliding_attention" for t in layer_types]
        if not any(sliding):
            return None, None
        declared = config.get("sliding_window_pattern", config.get("_sliding_window_pattern"))
        candidates = ([declared] if isinstance(declared, int) else []) + list(
            range(1, n_layers + 2)
        )
        for pattern in candidates:
            if pattern > 0 and all(s == ((i + 1) % pattern != 0) for i, s in enumerate(sliding)):
                return int(window), pattern
        raise ModelFileError("config.json: layer_types has an irregular sliding pattern")
    declared = config.get("sliding_window_pattern", config.get("_sliding_window_pattern"))
    return int(window), int(declared) if declared is not None else None


def from_hf_config(config: dict[str, Any]) -> ModelHParams:
    """ModelHParams from a config.json dict; raises ModelFileError naming the bad key."""
    if isinstance(config.get("text_config"), dict):
        raise ModelFileError("config.json: multimodal checkpoints (text_config) are not supported")
    arch = hf_architecture(config)
    n_layers = _get(config, "num_hidden_layers", int)
    hidden = _get(config, "hidden_size", int)
    n_heads = _get(config, "num_attention_heads", int)
    head_dim = config.get("head_dim") or (hidden // n_heads if n_heads > 0 else 0)
    context = _get(config, "max_position_embeddings", int)
    theta, scaling, local_theta = _rope_params(config, arch)
    window, pattern = _sliding(config, arch, n_layers)
    is_gemma = arch == "gemma3"
    act = config.get("hidden_activation") or config.get("hidden_act") or "silu"
    if act not in _ACT:
        raise ModelFileError(f"config.json: unsupported activation {act!r}")
    scalar = config.get("query_pre_attn_scalar")
    return ModelHParams(
        architecture=arch,
        n_layers=n_layers,
        hidden_size=hidden,
        ffn_size=_get(config, "intermediate_size", int),
        n_heads=n_heads,
        n_kv_heads=_get(config, "num_key_value_heads", int, n_heads),
        head_dim=int(head_dim),
        head_dim_v=int(head_dim),
        vocab_size=_get(config, "vocab_size", int),
        context_length=context,
        rope_theta=theta,
        norm_eps=_get(config, "rms_norm_eps", float, 1e-6),
        rope_scaling=_rope_scaling(scaling, context),
        rope_local_theta=local_theta if is_gemma else None,
        sliding_window=window,
        sliding_window_pattern=pattern if window is not None else None,
        attn_logit_softcap=_opt_float(config.get("attn_logit_softcapping")),
        final_logit_softcap=_opt_float(config.get("final_logit_softcapping")),
        tie_embeddings=bool(config.get("tie_word_embeddings", is_gemma)),
        qkv_bias=arch == "qwen2" or bool(config.get("attention_bias", False)),
        qk_norm=arch in ("qwen3", "gemma3"),
        query_pre_attn_scalar=float(scalar) if scalar is not None else None,
        hidden_act=_ACT[act],
        norm_weight_offset=1.0 if is_gemma else 0.0,
        rope_interleaved=False,
    )
