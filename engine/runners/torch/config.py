"""The torch runner's model description: sizes, per-layer attention kind and RoPE, built from
GGUF metadata or a Hugging Face config.json (both readers live in arch/)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ember.engine.errors import EngineError

ROPE_KINDS = ("default", "linear", "dynamic", "yarn", "llama3")


@dataclass(frozen=True)
class RopeParams:
    """One RoPE flavour: base, scaling kind and its knobs (HF `rope_parameters` semantics)."""

    theta: float = 10000.0
    kind: str = "default"
    factor: float = 1.0
    original_context: int | None = None  # trained context before scaling
    low_freq_factor: float = 1.0  # llama3
    high_freq_factor: float = 4.0  # llama3
    beta_fast: float = 32.0  # yarn
    beta_slow: float = 1.0  # yarn
    attn_factor: float | None = None  # yarn: cos/sin multiplier (None: 0.1 ln(factor) + 1)

    def __post_init__(self) -> None:
        if self.kind not in ROPE_KINDS:
            raise EngineError(
                f"RoPE scaling {self.kind!r} is not supported: use one of {ROPE_KINDS}"
            )
        if not (math.isfinite(self.theta) and self.theta > 0 and self.factor > 0):
            raise EngineError(f"RoPE theta={self.theta} factor={self.factor}: must be > 0")


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

    def __post_init__(self) -> None:
        for name in ("n_layers", "hidden_size", "ffn_size", "n_heads", "n_kv_heads", "head_dim"):
            if getattr(self, name) <= 0:
                raise EngineError(f"{self.arch}: {name}={getattr(self, name)} must be > 0")
        if self.n_heads % self.n_kv_heads:
            raise EngineError(f"{self.arch}: n_kv_heads {self.n_kv_heads} must divide n_heads")
        if self.layer_sliding and len(self.layer_sliding) != self.n_layers:
            raise EngineError(f"{self.arch}: layer_sliding needs one entry per layer")
        if any(self.layer_sliding) and not self.sliding_window:
            raise EngineError(f"{self.arch}: sliding layers need a sliding_window")
        if self.activation not in ("silu", "gelu_tanh"):
            raise EngineError(f"{self.arch}: activation {self.activation!r} is not supported")

    @property
    def scale(self) -> float:
        """Multiplier of q.k before softmax."""
        return self.attn_scale or self.head_dim**-0.5

    def is_sliding(self, layer: int) -> bool:
        """Whether layer `layer` attends only to the last sliding_window tokens."""
        return bool(self.layer_sliding) and self.layer_sliding[layer]

    def layer_rope(self, layer: int) -> RopeParams:
        """The RoPE flavour of one layer."""
        if self.rope_local is not None and self.is_sliding(layer):
            return self.rope_local
        return self.rope

    @property
    def kv_bytes_per_token(self) -> int:
        """K and V bytes per token over all layers, at 2 bytes per element (bf16)."""
        return 2 * self.n_layers * self.n_kv_heads * self.head_dim * 2
