"""RopeScaling: how a model stretches its rotary position embeddings past the trained context.

One description for both file formats, validated at construction (ModelFileError names the field):
- kind "linear" divides positions by factor; "dynamic" grows the base with the sequence (NTK);
  "yarn" blends interpolated and extrapolated frequencies between beta_slow and beta_fast
  rotations; "llama3" divides long wavelengths by factor (low/high_freq_factor bound the band);
  "longrope" (Phi-3 / Phi-4-mini) divides each frequency by its own factor: short_factor while
  the context fits original_context_length, long_factor beyond it.
- attn_factor is the cos/sin multiplier of yarn and longrope (transformers' attention_factor);
  None means the kind's default: yarn 0.1 ln(factor) + 1, or with mscale and mscale_all_dim
  (0.1 mscale ln f + 1) / (0.1 mscale_all_dim ln f + 1); longrope sqrt(1 + ln f / ln original).
- attn_multiplier is GGUF's rope.scaling.attn_factor: llama.cpp multiplies cos and sin by it on
  top of the kind's own factor (Phi-3's converter stores its LongRoPE factor there).
- long_factor / short_factor come from a Hugging Face config; GGUF files keep the same numbers
  as the rope_factors_long / rope_factors_short tensors instead, so they are empty there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ember.models.errors import ModelFileError

ROPE_KINDS: tuple[str, ...] = ("none", "linear", "yarn", "llama3", "dynamic", "longrope")
_POSITIVE_KNOBS = (
    "low_freq_factor",
    "high_freq_factor",
    "beta_fast",
    "beta_slow",
    "attn_factor",
    "mscale",
    "mscale_all_dim",
)


@dataclass(frozen=True)
class RopeScaling:
    """RoPE context extension: kind, factor, the trained context, and each kind's knobs."""

    kind: str = "none"
    factor: float = 1.0
    original_context_length: int | None = None
    # llama3 ("rope_type": "llama3")
    low_freq_factor: float | None = None
    high_freq_factor: float | None = None
    # yarn
    beta_fast: float | None = None
    beta_slow: float | None = None
    attn_factor: float | None = None  # yarn and longrope: replaces the kind's default factor
    mscale: float | None = None  # yarn (transformers; GGUF: 1 when yarn_log_multiplier is set)
    mscale_all_dim: float | None = None  # yarn (GGUF rope.scaling.yarn_log_multiplier)
    # longrope: per-frequency divisors (rotary_dim / 2 each), from a HF config only
    long_factor: tuple[float, ...] = ()
    short_factor: tuple[float, ...] = ()
    attn_multiplier: float = 1.0  # GGUF rope.scaling.attn_factor (llama.cpp's rope_attn_factor)

    def __post_init__(self) -> None:
        if self.kind not in ROPE_KINDS:
            raise ModelFileError(f"rope_scaling.kind: unknown RoPE scaling {self.kind!r}")
        if not (math.isfinite(self.factor) and self.factor > 0):
            raise ModelFileError(f"rope_scaling.factor: must be > 0, got {self.factor}")
        if self.kind == "none" and self.factor != 1.0:
            raise ModelFileError("rope_scaling.factor: must be 1.0 without scaling")
        if self.original_context_length is not None and self.original_context_length <= 0:
            raise ModelFileError("rope_scaling.original_context_length: must be > 0")
        for name in (*_POSITIVE_KNOBS, "attn_multiplier"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value > 0):
                raise ModelFileError(f"rope_scaling.{name}: must be > 0, got {value}")
        if self.kind == "llama3" and (
            self.low_freq_factor is None or self.high_freq_factor is None
        ):
            raise ModelFileError(
                "rope_scaling: llama3 scaling needs low_freq_factor and high_freq_factor"
            )
        if self.kind in ("llama3", "yarn", "longrope") and self.original_context_length is None:
            raise ModelFileError(f"rope_scaling: {self.kind} scaling needs original_context_length")
        if (
            self.low_freq_factor is not None
            and self.high_freq_factor is not None
            and self.high_freq_factor <= self.low_freq_factor
        ):  # llama3 interpolates over (high - low): equal factors divide by zero
            raise ModelFileError(
                f"rope_scaling.high_freq_factor: must be > low_freq_factor "
                f"({self.high_freq_factor} <= {self.low_freq_factor})"
            )
        self._check_factor_lists()

    def _check_factor_lists(self) -> None:
        if (self.long_factor or self.short_factor) and self.kind != "longrope":
            raise ModelFileError(f"rope_scaling.long_factor: given for {self.kind} scaling")
        if len(self.long_factor) != len(self.short_factor):
            raise ModelFileError(
                f"rope_scaling.short_factor: {len(self.short_factor)} values but long_factor "
                f"has {len(self.long_factor)}"
            )
        for name in ("long_factor", "short_factor"):
            for i, value in enumerate(getattr(self, name)):
                if isinstance(value, bool) or not isinstance(value, int | float):
                    raise ModelFileError(f"rope_scaling.{name}[{i}]: must be a number")
                if not (math.isfinite(value) and value > 0):
                    raise ModelFileError(f"rope_scaling.{name}[{i}]: must be > 0, got {value}")

    def check_rotary_dim(self, rotary_dim: int) -> None:
        """LongRoPE lists hold one divisor per rotated frequency pair."""
        if self.long_factor and len(self.long_factor) != rotary_dim // 2:
            raise ModelFileError(
                f"rope_scaling.long_factor: {len(self.long_factor)} values, expected "
                f"{rotary_dim // 2} (half the {rotary_dim} rotated dimensions)"
            )
