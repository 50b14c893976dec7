"""The torch runner's switches, mapped from the one model description (models/files' ModelHParams).

Public API:
    RopeParams                  one RoPE flavour as layers/rope.py computes it
    ModelConfig                 everything the generic decoder needs
    model_config(hp, spec)      the mapping: ModelHParams (+ the architecture's ArchSpec) -> config

Nothing here reads a file: the description was validated once in models/files, and this only
translates it (RoPE defaults filled in, per-layer sliding flags spelled out, gemma's embedding
scale and sandwich norms from the ArchSpec).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ember.engine.errors import EngineError

if TYPE_CHECKING:
    from ember.engine.runners.torch.arch.spec import ArchSpec
    from ember.models.files.hparams.hparams import ModelHParams

ROPE_KINDS = ("none", "linear", "dynamic", "yarn", "llama3", "longrope")  # RopeScaling.kind


@dataclass(frozen=True)
class RopeParams:
    """One RoPE flavour: base, scaling kind and its knobs (transformers' semantics)."""

    theta: float = 10000.0
    kind: str = "none"
    factor: float = 1.0
    original_context: int | None = None  # trained context before scaling
    low_freq_factor: float = 1.0  # llama3
    high_freq_factor: float = 4.0  # llama3
    beta_fast: float = 32.0  # yarn
    beta_slow: float = 1.0  # yarn
    attn_factor: float | None = None  # yarn/longrope: cos/sin multiplier (None: the default)
    mscale: float | None = None  # yarn: with mscale_all_dim, the default is their mscales' ratio
    mscale_all_dim: float | None = None
    attn_multiplier: float = 1.0  # cos/sin multiplied on top (GGUF rope.scaling.attn_factor)

    def __post_init__(self) -> None:
        if self.kind not in ROPE_KINDS:
            raise EngineError(
                f"RoPE scaling {self.kind!r} is not supported: use one of {ROPE_KINDS}"
            )
        if not (math.isfinite(self.theta) and self.theta > 1 and self.factor > 0):
            raise EngineError(f"RoPE theta={self.theta} factor={self.factor}: out of range")


@dataclass(frozen=True)
class ModelConfig:
    """Everything the generic decoder needs; validated at construction."""

    arch: str
    n_layers: int
    hidden_size: int
    ffn_size: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    vocab_size: int
    context_length: int
    norm_eps: float
    rope: RopeParams  # global (full-attention) layers
    rope_local: RopeParams | None = None  # sliding layers when they differ (gemma3)
    sliding_window: int | None = None
    layer_sliding: tuple[bool, ...] = ()  # per layer; empty = no sliding layers
    qkv_bias: bool = False
    qk_norm: bool = False
    sandwich_norms: bool = False  # gemma: post-attention and post-FFN norms too
    norm_offset: float = 0.0  # RMSNorm multiplies by (offset + w); folded into w at load
    embed_scale: float = 1.0  # gemma: sqrt(hidden)
    activation: str = "silu"  # silu | gelu_tanh
    attn_scale: float = 0.0  # 0 = head_dim ** -0.5
    attn_softcap: float | None = None
    final_softcap: float | None = None
    tie_embeddings: bool = False
    rotary_dim: int = 0  # dims of each head RoPE rotates (the first ones); 0 = head_dim
    layer_rope: tuple[bool, ...] = ()  # per layer: rotates q/k at all; empty = every layer
    attn_temperature: tuple[float, int] | None = None  # mistral3: (scale, length), see ropes.py
    unpermute_qk: bool = False  # GGUF llama: undo the converter's Q/K row permutation at load
    n_experts: int = 0  # MoE: experts per layer (0 = a dense FFN)
    n_experts_used: int = 0  # experts chosen per token
    expert_ffn_size: int = 0  # one expert's hidden width
    norm_topk_prob: bool = False  # renormalise the chosen experts' weights to sum to 1

    def __post_init__(self) -> None:
        for name in ("n_layers", "hidden_size", "ffn_size", "n_heads", "n_kv_heads", "head_dim"):
            if getattr(self, name) <= 0:
                raise EngineError(f"{self.arch}: {name}={getattr(self, name)} must be > 0")
        if self.n_heads % self.n_kv_heads:
            raise EngineError(f"{self.arch}: n_kv_heads {self.n_kv_heads} must divide n_heads")
        if self.layer_sliding and len(self.layer_sliding) != self.n_layers:
            raise EngineError(f"{self.arch}: layer_sliding needs one entry per layer")
        if self.layer_rope and len(self.layer_rope) != self.n_layers:
            raise EngineError(f"{self.arch}: layer_rope needs one entry per layer")
        if self.rotary_dim % 2 or not 0 <= self.rotary_dim <= self.head_dim:
            raise EngineError(f"{self.arch}: rotary_dim {self.rotary_dim} of {self.head_dim}")
        if any(self.layer_sliding) and not self.sliding_window:
            raise EngineError(f"{self.arch}: sliding layers need a sliding_window")
        if self.n_experts and not 0 < self.n_experts_used <= self.n_experts:
            raise EngineError(
                f"{self.arch}: n_experts_used={self.n_experts_used} must be in 1..{self.n_experts}"
            )
        if self.activation not in ("silu", "gelu_tanh"):
            raise EngineError(f"{self.arch}: activation {self.activation!r} is not supported")

    @property
    def scale(self) -> float:
        """Multiplier of q.k before softmax."""
        return self.attn_scale or self.head_dim**-0.5

    def is_sliding(self, layer: int) -> bool:
        """Whether layer `layer` attends only to the last sliding_window tokens."""
        return bool(self.layer_sliding) and self.layer_sliding[layer]

    @property
    def rope_dim(self) -> int:
        """Dimensions of each q/k head that RoPE rotates."""
        return self.rotary_dim or self.head_dim

    def uses_rope(self, layer: int) -> bool:
        """Whether layer `layer` rotates q and k (smollm3's NoPE layers do not)."""
        return not self.layer_rope or self.layer_rope[layer]

    def rope_of(self, layer: int) -> RopeParams:
        """The RoPE flavour of one layer."""
        if self.rope_local is not None and self.is_sliding(layer):
            return self.rope_local
        return self.rope

    @property
    def kv_bytes_per_token(self) -> int:
        """K and V bytes per token over all layers, at 2 bytes per element (bf16)."""
        return 2 * self.n_layers * self.n_kv_heads * self.head_dim * 2


def _rope(hp: ModelHParams) -> RopeParams:
    s = hp.rope_scaling
    knobs = {  # absent knobs keep RopeParams' defaults (transformers' own)
        name: value
        for name, value in (
            ("low_freq_factor", s.low_freq_factor),
            ("high_freq_factor", s.high_freq_factor),
            ("beta_fast", s.beta_fast),
            ("beta_slow", s.beta_slow),
        )
        if value is not None
    }
    return RopeParams(
        theta=hp.rope_theta,
        kind=s.kind,
        factor=s.factor,
        original_context=s.original_context_length,
        attn_factor=s.attn_factor,
        mscale=s.mscale,
        mscale_all_dim=s.mscale_all_dim,
        attn_multiplier=s.attn_multiplier,
        **knobs,
    )


def model_config(hp: ModelHParams, spec: ArchSpec) -> ModelConfig:
    """The decoder's switches for a validated description (EngineError if we cannot build it)."""
    if hp.head_dim_v != hp.head_dim:
        raise EngineError(
            f"{hp.architecture}: value heads of {hp.head_dim_v} and key heads of {hp.head_dim}: "
            "the torch runner needs them equal"
        )
    sliding = tuple(hp.is_sliding(i) for i in range(hp.n_layers))
    rotates = tuple(hp.uses_rope(i) for i in range(hp.n_layers))
    temperature = None
    if hp.attn_temperature_scale is not None and hp.attn_temperature_length is not None:
        temperature = (hp.attn_temperature_scale, hp.attn_temperature_length)
    return ModelConfig(
        arch=hp.architecture,
        n_layers=hp.n_layers,
        hidden_size=hp.hidden_size,
        ffn_size=hp.ffn_size,
        n_heads=hp.n_heads,
        n_kv_heads=hp.n_kv_heads,
        head_dim=hp.head_dim,
        vocab_size=hp.vocab_size,
        context_length=hp.context_length,
        norm_eps=hp.norm_eps,
        rope=_rope(hp),
        rope_local=RopeParams(theta=hp.rope_local_theta) if hp.rope_local_theta else None,
        sliding_window=hp.sliding_window if any(sliding) else None,
        layer_sliding=sliding if any(sliding) else (),
        qkv_bias=hp.qkv_bias,
        qk_norm=hp.qk_norm,
        sandwich_norms=spec.sandwich_norms,
        norm_offset=hp.norm_weight_offset,
        embed_scale=math.sqrt(hp.hidden_size) if spec.embed_scale else 1.0,
        activation=hp.hidden_act,
        attn_scale=hp.attn_scale,
        attn_softcap=hp.attn_logit_softcap,
        final_softcap=hp.final_logit_softcap,
        tie_embeddings=hp.tie_embeddings,
        rotary_dim=hp.rotary_dim,
        layer_rope=() if all(rotates) else rotates,
        attn_temperature=temperature,
        unpermute_qk=hp.rope_interleaved,
        n_experts=hp.n_experts,
        n_experts_used=hp.n_experts_used,
        expert_ffn_size=hp.expert_ffn_size,
        norm_topk_prob=hp.norm_topk_prob,
    )
