"""Rotary position embeddings (NeoX half-split layout) with default, linear, dynamic-NTK, YaRN,
Llama-3 and LongRoPE frequency scaling, following the Hugging Face definitions.

A Rope of dim D rotates the first D dimensions of each head (partial rotary: Phi-4-mini turns 96
of 128); the rest pass through unchanged. cos/sin carry the flavour's attention factor times
its attn_multiplier (llama.cpp's rope.scaling.attn_factor)."""

from __future__ import annotations

import math

import torch

from ember.engine.runners.torch.config import RopeParams


def _base_inv_freq(theta: float, dim: int) -> torch.Tensor:
    # inv_freq[i] = theta ** (-2i / dim), i < dim / 2
    return 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))


def _llama3(p: RopeParams, inv_freq: torch.Tensor) -> torch.Tensor:
    # Long wavelengths are divided by factor, short ones kept, the band between interpolated.
    old_ctx = float(p.original_context or 8192)
    low_wavelen = old_ctx / p.low_freq_factor
    high_wavelen = old_ctx / p.high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_wavelen, inv_freq / p.factor, inv_freq)
    smooth = (old_ctx / wavelen - p.low_freq_factor) / (p.high_freq_factor - p.low_freq_factor)
    smoothed = (1 - smooth) * scaled / p.factor + smooth * scaled
    medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
    return torch.where(medium, smoothed, scaled)


def _mscale(factor: float, mscale: float = 1.0) -> float:
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


def _yarn_attention(p: RopeParams) -> float:
    """YaRN's cos/sin factor: given, or the ratio of two mscales (transformers; llama.cpp's
    yarn_log_multiplier is mscale_all_dim with mscale 1), or 0.1 ln(factor) + 1."""
    if p.attn_factor is not None:
        return p.attn_factor
    if p.mscale and p.mscale_all_dim:
        return _mscale(p.factor, p.mscale) / _mscale(p.factor, p.mscale_all_dim)
    return _mscale(p.factor)


def _longrope_attention(p: RopeParams) -> float:
    # transformers: sqrt(1 + ln(factor) / ln(original context)) unless the config gives one
    if p.attn_factor is not None:
        return p.attn_factor
    if p.factor <= 1:
        return 1.0
    return math.sqrt(1 + math.log(p.factor) / math.log(p.original_context or 4096))


def _yarn(p: RopeParams, dim: int) -> tuple[torch.Tensor, float]:
    # Blend interpolated (pos / factor) and extrapolated frequencies with a linear ramp over
    # the dimensions whose rotation count within the original context lies in [beta_slow, beta_fast].
    old_ctx = float(p.original_context or 4096)

    def correction_dim(rotations: float) -> float:
        return (dim * math.log(old_ctx / (rotations * 2 * math.pi))) / (2 * math.log(p.theta))

    low = float(max(math.floor(correction_dim(p.beta_fast)), 0))
    high = float(min(math.ceil(correction_dim(p.beta_slow)), dim - 1))
    if low == high:
        high += 0.001
    ramp = ((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)
    extrapolation = 1 - ramp
    pos_freqs = p.theta ** (torch.arange(0, dim, 2).float() / dim)
    inv_freq = (1.0 / (p.factor * pos_freqs)) * (1 - extrapolation) + (
        1.0 / pos_freqs
    ) * extrapolation
    return inv_freq, _yarn_attention(p)


def inv_freq_for(p: RopeParams, dim: int, seq_len: int = 0) -> tuple[torch.Tensor, float]:
    """(inverse frequencies (dim/2,) float32, cos/sin multiplier) of p for a sequence of seq_len;
    LongRoPE's per-frequency divisors are the Rope's freq_factors, applied after this."""
    inv_freq, attn = _flavour(p, dim, seq_len)
    return inv_freq, attn * p.attn_multiplier


def _flavour(p: RopeParams, dim: int, seq_len: int) -> tuple[torch.Tensor, float]:
    if p.kind == "yarn":
        return _yarn(p, dim)
    if p.kind == "longrope":
        return _base_inv_freq(p.theta, dim), _longrope_attention(p)
    if p.kind == "dynamic":
        # NTK-aware: grow the base once the sequence outgrows the trained context.
        old_ctx = p.original_context or seq_len or 1
        seq_len = max(seq_len, old_ctx)
        base = p.theta * ((p.factor * seq_len / old_ctx) - (p.factor - 1)) ** (dim / (dim - 2))
        return _base_inv_freq(base, dim), 1.0
    inv_freq = _base_inv_freq(p.theta, dim)
    if p.kind == "linear":
        return inv_freq / p.factor, 1.0
    if p.kind == "llama3":
        return _llama3(p, inv_freq), 1.0
    return inv_freq, 1.0


class Rope:
    """cos/sin tables for one RoPE flavour; rotates (T, H, D) tensors at given positions."""

    def __init__(
        self,
        params: RopeParams,
        head_dim: int,
        device: torch.device,
        freq_factors: torch.Tensor | None = None,
    ) -> None:
        self.params = params
        self.head_dim = head_dim  # the rotated dims (a head's first ones)
        self.device = device
        # rope_freqs (llama 3) or LongRoPE's long/short factors: inv_freq is divided by these
        self.freq_factors = freq_factors
        self._dynamic_len = 0
        self._set(seq_len=0)

    def _set(self, seq_len: int) -> None:
        inv_freq, self.attn_factor = inv_freq_for(self.params, self.head_dim, seq_len)
        if self.freq_factors is not None:
            inv_freq = inv_freq / self.freq_factors.float()
        self.inv_freq = inv_freq.to(self.device)

    def cos_sin(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin of shape (T, 1, D) float32 for int64 positions (T,)."""
        if self.params.kind == "dynamic":
            needed = int(positions.max()) + 1 if positions.numel() else 0
            if needed > max(self._dynamic_len, self.params.original_context or 0):
                self._dynamic_len = needed
                self._set(seq_len=needed)
        freqs = positions.to(torch.float32)[:, None] * self.inv_freq[None, :]  # (T, D/2)
        emb = torch.cat((freqs, freqs), dim=-1)[:, None, :]
        return emb.cos() * self.attn_factor, emb.sin() * self.attn_factor

    def shift_cos_sin(self, delta: int) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin (1, 1, D) of a pure rotation by delta positions (no attention factor)."""
        freqs = float(delta) * self.inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)[:, None, :]
        return emb.cos(), emb.sin()


def signed_sin(sin: torch.Tensor) -> torch.Tensor:
    """sin with its first half negated: rotate_half(x) * sin == x.roll(D/2) * signed_sin(sin)."""
    half = sin.shape[-1] // 2
    return torch.cat((-sin[..., :half], sin[..., half:]), dim=-1)


def apply_rope_signed(x: torch.Tensor, cos: torch.Tensor, sin_signed: torch.Tensor) -> torch.Tensor:
    """apply_rope with the sign folded into the table (the per-layer fast path: 5 ops); a table
    narrower than x rotates only x's first cos.shape[-1] dims (partial rotary)."""
    rotated = cos.shape[-1]
    if rotated != x.shape[-1]:
        head = apply_rope_signed(x[..., :rotated], cos, sin_signed)
        return torch.cat((head, x[..., rotated:]), dim=-1)
    xf = x.float()
    return (xf * cos + xf.roll(xf.shape[-1] // 2, -1) * sin_signed).to(x.dtype)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x * cos + rotate_half(x) * sin for x (T, H, D); computed in float32, returned in x's dtype."""
    return apply_rope_signed(x, cos, signed_sin(sin))
