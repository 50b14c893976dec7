"""ModelConfig from GGUF metadata (`{arch}.block_count`, ...) with llama.cpp's defaults."""

from __future__ import annotations

import math
from typing import Any

from ember.engine.errors import EngineError
from ember.engine.runners.torch.arch.spec import ArchSpec
from ember.engine.runners.torch.config import ModelConfig, RopeParams

_GEMMA3_SWA_PATTERN = 6  # llama.cpp hard-codes: every 6th gemma3 layer is global
_GEMMA3_LOCAL_THETA = 10000.0


def _get(md: dict[str, Any], key: str, default: Any = None) -> Any:
    value = md.get(key, default)
    if value is None:
        raise EngineError(f"GGUF metadata key {key} is missing")
    return value


def _rope(md: dict[str, Any], arch: str) -> RopeParams:
    kind = str(md.get(f"{arch}.rope.scaling.type", "none"))
    theta = float(md.get(f"{arch}.rope.freq_base", 10000.0))
    factor = float(md.get(f"{arch}.rope.scaling.factor", 1.0) or 1.0)
    orig = md.get(f"{arch}.rope.scaling.original_context_length")
    if kind in ("none", "") or (kind == "linear" and factor == 1.0):
        return RopeParams(theta=theta)
    if kind not in ("linear", "yarn", "dynamic"):
        raise EngineError(f"GGUF rope.scaling.type {kind!r} is not supported")
    return RopeParams(
        theta=theta,
        kind=kind,
        factor=factor,
        original_context=int(orig) if orig else None,
        beta_fast=float(md.get(f"{arch}.rope.scaling.yarn_beta_fast", 32.0)),
        beta_slow=float(md.get(f"{arch}.rope.scaling.yarn_beta_slow", 1.0)),
    )


def _sliding(
    md: dict[str, Any], spec: ArchSpec, n_layers: int
) -> tuple[int | None, tuple[bool, ...]]:
    window = md.get(f"{spec.name}.attention.sliding_window")
    if not window:
        return None, ()
    pattern = md.get(f"{spec.name}.attention.sliding_window_pattern")
    if isinstance(pattern, list) and len(pattern) == n_layers:
        return int(window), tuple(bool(p) for p in pattern)
    every = (
        int(pattern)
        if isinstance(pattern, int)
        else (_GEMMA3_SWA_PATTERN if spec.name == "gemma3" else 0)
    )
    if every <= 0:
        return int(window), tuple(True for _ in range(n_layers))
    return int(window), tuple((i + 1) % every != 0 for i in range(n_layers))


def config_from_gguf(
    spec: ArchSpec, md: dict[str, Any], shapes: dict[str, tuple[int, ...]]
) -> ModelConfig:
    """Build the runner config from GGUF metadata and tensor shapes ((out, in) order)."""
    a = spec.name
    n_layers = int(_get(md, f"{a}.block_count"))
    hidden = int(_get(md, f"{a}.embedding_length"))
    n_heads = int(_get(md, f"{a}.attention.head_count"))
    head_dim = int(md.get(f"{a}.attention.key_length", hidden // n_heads))
    window, layer_sliding = _sliding(md, spec, n_layers)
    rope = _rope(md, a)
    rope_local = None
    if spec.name == "gemma3":
        rope_local = RopeParams(theta=float(md.get(f"{a}.rope.freq_base_swa", _GEMMA3_LOCAL_THETA)))
    scale = md.get(f"{a}.attention.scale")
    if scale:
        attn_scale = float(scale)
    elif spec.name == "gemma3" and n_layers == 62:  # 27B: scaled by hidden / heads (llama.cpp)
        attn_scale = (hidden / n_heads) ** -0.5
    else:
        attn_scale = 0.0
    embd = shapes["token_embd.weight"]
    return ModelConfig(
        arch=a,
        n_layers=n_layers,
        hidden_size=hidden,
        ffn_size=int(_get(md, f"{a}.feed_forward_length")),
        n_heads=n_heads,
        n_kv_heads=int(md.get(f"{a}.attention.head_count_kv", n_heads)),
        head_dim=head_dim,
        vocab_size=int(embd[0]),
        context_length=int(_get(md, f"{a}.context_length")),
        norm_eps=float(_get(md, f"{a}.attention.layer_norm_rms_epsilon")),
        rope=rope,
        rope_local=rope_local,
        sliding_window=window,
        layer_sliding=layer_sliding,
        qkv_bias="blk.0.attn_q.bias" in shapes,
        qk_norm="blk.0.attn_q_norm.weight" in shapes,
        sandwich_norms=spec.sandwich_norms,
        norm_offset=0.0,  # llama.cpp's converter already folded gemma's +1 into the weights
        embed_scale=math.sqrt(hidden) if spec.embed_scale else 1.0,
        activation=spec.activation,
        attn_scale=attn_scale,
        attn_softcap=md.get(f"{a}.attn_logit_softcapping"),
        final_softcap=md.get(f"{a}.final_logit_softcapping"),
        tie_embeddings="output.weight" not in shapes,
    )
