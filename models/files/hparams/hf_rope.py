"""The RoPE side of a Hugging Face config.json: base, scaling, partial rotary, NoPE layers.

Reads both config generations (transformers 4.x `rope_theta` / `rope_scaling` /
`rope_local_base_freq` beside each other, 5.x `rope_parameters`, per layer type for gemma3) with
transformers' meanings: a longrope factor defaults to the context's growth over the original,
Phi-3's 4.x configs keep original_max_position_embeddings at the top level, 5.x moves
partial_rotary_factor into rope_parameters, and Ministral 3's llama_4_scaling_beta sits there too.
"""

from __future__ import annotations

from typing import Any

from ember.models.files.fields import REQUIRED, Fields, built
from ember.models.files.hparams.families import Family
from ember.models.files.hparams.hparams import MAX_CONTEXT, MAX_LAYERS, MAX_ROPE_THETA
from ember.models.files.hparams.rope import RopeScaling

_ROPE_TYPES = ("default", "none", "linear", "dynamic", "yarn", "llama3", "longrope", "su")
_KNOB_MAX = 1e6  # RoPE factors and betas: released models use 1..64


def _rope_type(f: Fields) -> str:
    key = "type" if f.has("type") and not f.has("rope_type") else "rope_type"
    kind = f.string(key, "default", choices=_ROPE_TYPES)
    return {"default": "none", "su": "longrope"}.get(kind, kind)


def _factor_list(f: Fields, key: str) -> tuple[float, ...]:
    values = f.array(key)
    if values is None:
        raise f.error(key, "missing (longrope needs long_factor and short_factor)")
    return tuple(values)  # each value's type and range: RopeScaling names the bad one


def _scaling(f: Fields | None, context_length: int, original: int | None) -> RopeScaling:
    """RopeScaling from a rope_scaling / rope_parameters object (transformers' semantics);
    original: a top-level original_max_position_embeddings (Phi-3's 4.x configs keep it there)."""
    kind = "none" if f is None else _rope_type(f)
    if f is None or kind == "none":
        return RopeScaling()
    # transformers 5.x: original_max_position_embeddings defaults to max_position_embeddings
    original = f.integer(
        "original_max_position_embeddings", original or context_length, lo=1, hi=MAX_CONTEXT
    )
    longrope = kind == "longrope"
    # longrope: the factor defaults to the context's growth (transformers)
    factor_default = max(1.0, context_length / original) if longrope else REQUIRED
    return built(
        f.source,
        RopeScaling,
        kind=kind,
        factor=f.number("factor", factor_default, positive=True, hi=_KNOB_MAX),
        original_context_length=original if kind != "linear" else None,
        low_freq_factor=f.opt_number("low_freq_factor", positive=True, hi=_KNOB_MAX),
        high_freq_factor=f.opt_number("high_freq_factor", positive=True, hi=_KNOB_MAX),
        beta_fast=f.opt_number("beta_fast", positive=True, hi=_KNOB_MAX),
        beta_slow=f.opt_number("beta_slow", positive=True, hi=_KNOB_MAX),
        attn_factor=f.opt_number("attention_factor", positive=True, hi=_KNOB_MAX),
        mscale=f.opt_number("mscale", positive=True, hi=_KNOB_MAX) if kind == "yarn" else None,
        mscale_all_dim=(
            f.opt_number("mscale_all_dim", positive=True, hi=_KNOB_MAX) if kind == "yarn" else None
        ),
        long_factor=_factor_list(f, "long_factor") if longrope else (),
        short_factor=_factor_list(f, "short_factor") if longrope else (),
    )


def rope_fields(
    f: Fields, fam: Family, context: int
) -> tuple[float, RopeScaling, float | None, Fields]:
    """(global theta, global scaling, local theta, the fields holding them) from either config
    generation."""
    params = f.object("rope_parameters")
    local: Fields | None = None  # where the sliding layers' base is read (gemma3)
    local_key = "rope_theta"
    if params is None:  # 4.x: rope_theta, rope_scaling and rope_local_base_freq side by side
        full, scaling, local, local_key = f, f.object("rope_scaling"), f, "rope_local_base_freq"
    elif params.has("full_attention") or params.has("sliding_attention"):  # 5.x, per layer type
        if fam.local_theta is None:
            raise params.error("sliding_attention", f"per-layer-type RoPE is not {fam.arch}'s")
        empty = Fields({}, f.source, f"{params.prefix}full_attention.")
        full = scaling = params.object("full_attention") or empty
        local = params.object("sliding_attention")
        if local is not None and _rope_type(local) != "none":
            raise local.error("rope_type", "scaled RoPE on sliding layers is not supported")
    else:  # 5.x, one set for every layer
        full = scaling = params
    theta = full.number("rope_theta", fam.rope_theta, lo=1.0, hi=MAX_ROPE_THETA)
    local_theta = fam.local_theta
    if local is not None and local_theta is not None:  # only gemma3 rotates sliding layers apart
        local_theta = local.number(local_key, local_theta, lo=1.0, hi=MAX_ROPE_THETA)
    original = f.opt_integer("original_max_position_embeddings", lo=1, hi=MAX_CONTEXT)
    return theta, _scaling(scaling, context, original), local_theta, full


def _nope_interval(f: Fields, fam: Family, n_layers: int) -> int | None:
    """smollm3's RoPE-less layers as "every Nth" (no_rope_layers: 1 = rotates, 0 = NoPE)."""
    if not fam.nope:
        return None
    flags = f.array("no_rope_layers")
    if flags is None:  # transformers derives the list from the interval
        return f.integer("no_rope_layer_interval", 4, lo=1, hi=MAX_LAYERS)
    if len(flags) != n_layers:
        raise f.error("no_rope_layers", f"has {len(flags)} entries for {n_layers} layers")
    rotates = []
    for i, flag in enumerate(flags):
        if flag not in (0, 1) or isinstance(flag, float):
            raise f.error(f"no_rope_layers[{i}]", f"must be 0 or 1, got {flag!r}")
        rotates.append(bool(flag))
    if all(rotates):
        return None
    for step in range(1, n_layers + 1):
        if all(r == ((i + 1) % step != 0) for i, r in enumerate(rotates)):
            return step
    raise f.error("no_rope_layers", "irregular NoPE layers (not every Nth layer)")


def rotary_fields(
    f: Fields, rope: Fields, fam: Family, sizes: dict[str, int], scaling: RopeScaling
) -> dict[str, Any]:
    """Partial rotary dims (partial_rotary_factor, in rope_parameters on 5.x), NoPE layers and
    Ministral 3's query temperature (llama_4_scaling_beta over the original context)."""
    head_dim = sizes["head_dim"]
    key = "partial_rotary_factor"
    where = rope if rope.has(key) else f
    fraction = where.number(key, 1.0, positive=True, hi=1.0)
    rope_dim = int(head_dim * fraction)  # transformers rounds down the same way
    beta = rope.opt_number("llama_4_scaling_beta", positive=True, hi=_KNOB_MAX)
    length = scaling.original_context_length
    if beta is not None and length is None:
        raise rope.error("llama_4_scaling_beta", "needs original_max_position_embeddings")
    return {
        "rope_dim": None if rope_dim == head_dim else rope_dim,
        "nope_layer_interval": _nope_interval(f, fam, sizes["n_layers"]),
        "attn_temperature_scale": beta,
        "attn_temperature_length": length if beta is not None else None,
    }
