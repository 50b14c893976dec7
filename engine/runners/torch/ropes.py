"""The RoPE side of a TorchRunner: one Rope per kind of layer, LongRoPE's factor choice, and each
step's position inputs (cos/sin tables, and mistral3's query temperature).

LongRoPE (Phi-3 / Phi-4-mini) divides every frequency by its own factor: the short list while
the context fits the original one, the long list beyond it. llama.cpp picks the list once per
context from its size (n_ctx_seq > n_ctx_orig_yarn), never per token, so cached keys stay
valid; we pick it the same way from the KV cache's size at init_kv.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch

from ember.engine.errors import EngineError
from ember.engine.runners.torch.layers.rope import Rope, signed_sin

if TYPE_CHECKING:
    from ember.engine.runners.torch.config import ModelConfig
    from ember.engine.runners.torch.loader import ModelSource

RopeTables = dict[bool, tuple[torch.Tensor, torch.Tensor]]  # is_sliding -> cos, signed sin


def freq_factors(src: ModelSource, context_tokens: int) -> torch.Tensor | None:
    """The per-frequency divisors of src's RoPE (rotary_dim / 2,), None when it has none: GGUF's
    rope_freqs tensor (llama 3), or LongRoPE's long or short list for this context."""
    tensors, scaling = src.tensors, src.hparams.rope_scaling
    if "rope_freqs.weight" in tensors:
        return _divisors(src, "rope_freqs.weight")
    if scaling.kind != "longrope":
        return None
    long = context_tokens > (scaling.original_context_length or 0)
    if scaling.long_factor:  # a Hugging Face config carries the lists (validated there)
        return torch.tensor(scaling.long_factor if long else scaling.short_factor)
    name = "rope_factors_long.weight" if long else "rope_factors_short.weight"
    if name not in tensors:
        raise EngineError(f"{src.path}: tensor {name} is missing (LongRoPE)")
    return _divisors(src, name)


def _divisors(src: ModelSource, name: str) -> torch.Tensor:
    """A GGUF frequency-divisor tensor, each value finite and > 0 (a 0 or NaN would turn every
    rotation into NaN: a silent wrong answer, not an error)."""
    values = src.tensors[name].to_float().flatten()
    bad = ~(torch.isfinite(values) & (values > 0))
    if bool(bad.any()):
        i = int(bad.nonzero()[0])
        raise EngineError(
            f"{src.path}: tensor {name}[{i}] is {float(values[i])}: RoPE divisors must be > 0"
        )
    return values


def build_ropes(
    src: ModelSource, device: torch.device, context_tokens: int = 0
) -> dict[bool, Rope]:
    """One Rope per kind of layer (is_sliding -> Rope) for a context of context_tokens."""
    cfg = src.config
    factors = freq_factors(src, context_tokens)
    if factors is not None and factors.numel() != cfg.rope_dim // 2:
        raise EngineError(
            f"{src.path}: {factors.numel()} RoPE frequency factors for {cfg.rope_dim // 2} "
            "frequency pairs"
        )
    kinds = {cfg.is_sliding(i) for i in range(cfg.n_layers)}
    return {
        sliding: Rope(cfg.rope_of(first_layer(cfg, sliding)), cfg.rope_dim, device, factors)
        for sliding in kinds
    }


def first_layer(cfg: ModelConfig, sliding: bool) -> int:
    return next(i for i in range(cfg.n_layers) if cfg.is_sliding(i) == sliding)


def step_tables(ropes: dict[bool, Rope], positions: torch.Tensor) -> RopeTables:
    """cos and signed sin (N, 1, rope_dim) of each kind of layer at int64 positions (N,)."""
    out = {}
    for sliding, rope in ropes.items():
        cos, sin = rope.cos_sin(positions)
        out[sliding] = (cos, signed_sin(sin))
    return out


def query_temperature(cfg: ModelConfig, positions: torch.Tensor) -> torch.Tensor | None:
    """mistral3's query multiplier (N, 1, 1) float32, None for other models: queries at position
    p are scaled by 1 + scale * ln(1 + floor(p / length)) after RoPE (transformers'
    llama_4_scaling_beta over the original context; llama.cpp's attention.temperature_scale)."""
    if cfg.attn_temperature is None:
        return None
    scale, length = cfg.attn_temperature
    steps = torch.floor(positions.to(torch.float32) / float(length))
    return (1.0 + scale * torch.log1p(steps))[:, None, None]


def temperature_at(cfg: ModelConfig, position: int) -> float:
    """The same multiplier for one position, as a Python float (the native step's table)."""
    if cfg.attn_temperature is None:
        return 1.0
    scale, length = cfg.attn_temperature
    return 1.0 + scale * math.log1p(position // length)
