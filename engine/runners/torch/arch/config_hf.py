"""ModelConfig from a Hugging Face config.json (old `rope_scaling` and new `rope_parameters`)."""

from __future__ import annotations

import math
from typing import Any

from ember.engine.errors import EngineError
from ember.engine.runners.torch.arch.spec import ArchSpec
from ember.engine.runners.torch.config import ModelConfig, RopeParams

_KINDS = {
    "default": "default",
    "linear": "linear",
    "dynamic": "dynamic",
    "yarn": "yarn",
    "llama3": "llama3",
}


def _rope(params: dict[str, Any] | None, theta: float, max_pos: int) -> RopeParams:
    params = params or {}
    kind = str(params.get("rope_type", params.get("type", "default")))
    if kind not in _KINDS:
        raise EngineError(f"RoPE type {kind!r} is not supported (supported: {', '.join(_KINDS)})")
    theta = float(params.get("rope_theta", theta))
    if kind == "default":
        return RopeParams(theta=theta)
    orig = params.get("original_max_position_embeddings")
    return RopeParams(
        theta=theta,
        kind=kind,
        factor=float(params.get("factor", 1.0)),
        original_context=int(orig) if orig else max_pos,
        low_freq_factor=float(params.get("low_freq_factor", 1.0)),
        high_freq_factor=float(params.get("high_freq_factor", 4.0)),
        beta_fast=float(params.get("beta_fast") or 32.0),
        beta_slow=float(params.get("beta_slow") or 1.0),
        attn_factor=params.get("attention_factor"),
    )


def _ropes(cfg: dict[str, Any], max_pos: int) -> tuple[RopeParams, RopeParams | None]:
    theta = float(cfg.get("rope_theta", 10000.0))
    params = cfg.get("rope_parameters")
    if isinstance(params, dict) and "full_attention" in params:  # per layer kind (gemma3)
        local = params.get("sliding_attention")
        return _rope(params["full_attention"], theta, max_pos), (
            _rope(local, theta, max_pos) if local else None
        )
    main = _rope(params if isinstance(params, dict) else cfg.get("rope_scaling"), theta, max_pos)
    local_theta = cfg.get("rope_local_base_freq")
    return main, RopeParams(theta=float(local_theta)) if local_theta else None


def _layer_sliding(cfg: dict[str, Any], n_layers: int) -> tuple[int | None, tuple[bool, ...]]:
    window = cfg.get("sliding_window")
    types = cfg.get("layer_types")
    if isinstance(types, list) and len(types) == n_layers:
        sliding = tuple(t == "sliding_attention" for t in types)
    elif cfg.get("sliding_window_pattern"):
        every = int(cfg["sliding_window_pattern"])
        sliding = tuple((i + 1) % every != 0 for i in range(n_layers))
    elif cfg.get("use_sliding_window") and window:
        sliding = tuple(True for _ in range(n_layers))
    else:
        sliding = ()
    if not any(sliding) or not window:
        return None, ()
    return int(window), sliding


def config_from_hf(spec: ArchSpec, cfg: dict[str, Any]) -> ModelConfig:
    """Build the runner config from a config.json dict (text config of multimodal models)."""
    cfg = cfg.get("text_config", cfg) if spec.name == "gemma3" else cfg
    n_layers = int(cfg["num_hidden_layers"])
    hidden = int(cfg["hidden_size"])
    n_heads = int(cfg["num_attention_heads"])
    max_pos = int(cfg.get("max_position_embeddings", 4096))
    rope, rope_local = _ropes(cfg, max_pos)
    window, sliding = _layer_sliding(cfg, n_layers)
    scalar = cfg.get("query_pre_attn_scalar")
    act = str(cfg.get("hidden_activation") or cfg.get("hidden_act") or "silu")
    return ModelConfig(
        arch=spec.name,
        n_layers=n_layers,
        hidden_size=hidden,
        ffn_size=int(cfg["intermediate_size"]),
        n_heads=n_heads,
        n_kv_heads=int(cfg.get("num_key_value_heads") or n_heads),
        head_dim=int(cfg.get("head_dim") or hidden // n_heads),
        vocab_size=int(cfg["vocab_size"]),
        context_length=max_pos,
        norm_eps=float(cfg.get("rms_norm_eps", 1e-6)),
        rope=rope,
        rope_local=rope_local,
        sliding_window=window,
        layer_sliding=sliding,
        qkv_bias=spec.qkv_bias or bool(cfg.get("attention_bias", False)),
        qk_norm=spec.qk_norm,
        sandwich_norms=spec.sandwich_norms,
        norm_offset=spec.hf_norm_offset,
        embed_scale=math.sqrt(hidden) if spec.embed_scale else 1.0,
        activation="gelu_tanh" if act.startswith("gelu") else act,
        attn_scale=float(scalar) ** -0.5 if scalar else 0.0,
        attn_softcap=cfg.get("attn_logit_softcapping"),
        final_softcap=cfg.get("final_logit_softcapping"),
        tie_embeddings=bool(cfg.get("tie_word_embeddings", spec.tie_default)),
    )
