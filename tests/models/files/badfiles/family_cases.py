"""Malformed files of the dense families (phi3, gemma2, smollm3, mistral3): each case edits a valid
quick GGUF of the family (tests/fixtures/quick_families.py) or a tiny config.json, and names the
fragment the one-line error must contain (the tensor or the field, and why).

FAMILY_GGUF_CASES: case id -> (arch, edit, fragment), refused by open_gguf's checks.
FAMILY_VALUE_CASES: the same, for tensor values only the torch runner reads (RoPE divisors).
FAMILY_CONFIG_CASES: case id -> (arch, config change, fragment), refused by from_hf_config.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from tests.models.files.badfiles.layout import FLOAT32, STRING, GGUFSpec, gstr, kv, kv_u32

Edit = Callable[[GGUFSpec], None]


def _drop(name: str) -> Edit:
    return lambda s: s.tensors.remove(s.tensor(name))


def _shape(name: str, ne: list[int]) -> Edit:
    return lambda s: setattr(s.tensor(name), "ne", ne)


def _f32(key: str, value: float) -> Edit:
    return lambda s: s.set_kv(key, kv(key, FLOAT32, struct.pack("<f", value)))


def _u32(key: str, value: int) -> Edit:
    return lambda s: s.set_kv(key, kv_u32(key, value))


def _string(key: str, value: str) -> Edit:
    return lambda s: s.set_kv(key, kv(key, STRING, gstr(value)))


def _add_u32(key: str, value: int) -> Edit:
    return lambda s: s.kvs.append(kv_u32(key, value))


def _poke_f32(name: str, index: int, value: float) -> Edit:
    """Overwrite one float32 of an F32 tensor's data."""

    def edit(s: GGUFSpec) -> None:
        at = s.tensor(name).offset + 4 * index
        s.data = s.data[:at] + struct.pack("<f", value) + s.data[at + 4 :]

    return edit


FAMILY_GGUF_CASES: dict[str, tuple[str, Edit, str]] = {
    "phi3_missing_fused_qkv": (
        "phi3",
        _drop("blk.0.attn_qkv.weight"),
        "missing tensor blk.0.attn_qkv.weight (phi3)",
    ),
    "phi3_unfused_gate_up": (  # an ffn_up of ffn rows, not gate|up's 2 * ffn
        "phi3",
        _shape("blk.1.ffn_up.weight", [64, 128]),
        "tensor blk.1.ffn_up.weight has shape (128, 64), expected (256, 64)",
    ),
    "phi3_rope_factors_wrong_length": (
        "phi3",
        _shape("rope_factors_long.weight", [8]),
        "tensor rope_factors_long.weight has shape (8,), expected (12,)",
    ),
    "phi3_missing_short_factors": (
        "phi3",
        _drop("rope_factors_short.weight"),
        "missing tensor rope_factors_short.weight (phi3)",
    ),
    "phi3_rope_dim_odd": (
        "phi3",
        _u32("phi3.rope.dimension_count", 23),
        "phi3.rope.dimension_count: 23 is odd (RoPE rotates pairs)",
    ),
    "phi3_rope_dim_past_the_head": (
        "phi3",
        _u32("phi3.rope.dimension_count", 64),
        "phi3.rope.dimension_count: must be in 2..32, got 64",
    ),
    "phi3_negative_attn_factor": (
        "phi3",
        _f32("phi3.rope.scaling.attn_factor", -1.0),
        "phi3.rope.scaling.attn_factor: must be > 0",
    ),
    "gemma2_missing_post_ffw_norm": (
        "gemma2",
        _drop("blk.0.post_ffw_norm.weight"),
        "missing tensor blk.0.post_ffw_norm.weight (gemma2)",
    ),
    "gemma2_zero_final_softcap": (
        "gemma2",
        _f32("gemma2.final_logit_softcapping", 0.0),
        "gemma2.final_logit_softcapping: must be > 0",
    ),
    "gemma2_nan_attn_softcap": (
        "gemma2",
        _f32("gemma2.attn_logit_softcapping", float("nan")),
        "gemma2.attn_logit_softcapping: must be a finite number",
    ),
    "gemma2_pattern_past_the_layers": (  # every 4th layer global in a 2-layer model: fine;
        "gemma2",  # a pattern of 0 is not a pattern
        _add_u32("gemma2.attention.sliding_window_pattern", 0),
        "gemma2.attention.sliding_window_pattern: must be",
    ),
    "smollm3_missing_k": (
        "smollm3",
        _drop("blk.1.attn_k.weight"),
        "missing tensor blk.1.attn_k.weight (smollm3)",
    ),
    "mistral3_negative_temperature": (
        "mistral3",
        _f32("mistral3.attention.temperature_scale", -0.1),
        "mistral3.attention.temperature_scale: must be > 0",
    ),
    "mistral3_unknown_rope_scaling": (
        "mistral3",
        _string("mistral3.rope.scaling.type", "ntk-by-parts"),
        "mistral3.rope.scaling.type: unsupported",
    ),
    "mistral3_nan_yarn_log_multiplier": (
        "mistral3",
        _f32("mistral3.rope.scaling.yarn_log_multiplier", float("nan")),
        "mistral3.rope.scaling.yarn_log_multiplier: must be a finite number",
    ),
}

FAMILY_VALUE_CASES: dict[str, tuple[str, Edit, str]] = {
    "phi3_zero_rope_divisor": (
        "phi3",
        _poke_f32("rope_factors_long.weight", 3, 0.0),
        "tensor rope_factors_long.weight[3] is 0.0: RoPE divisors must be > 0",
    ),
    "phi3_nan_rope_divisor": (
        "phi3",
        _poke_f32("rope_factors_long.weight", 0, float("nan")),
        "tensor rope_factors_long.weight[0] is nan: RoPE divisors must be > 0",
    ),
}

FAMILY_CONFIG_CASES: dict[str, tuple[str, dict[str, Any], str]] = {
    "phi3_long_factor_wrong_length": (
        "phi3",
        {"rope_parameters.long_factor": [1.0] * 10, "rope_parameters.short_factor": [1.0] * 10},
        "rope_scaling.long_factor: 10 values, expected 24",
    ),
    "phi3_short_factor_missing": (
        "phi3",
        {"rope_parameters.short_factor": None},
        "rope_parameters.short_factor: missing",
    ),
    "phi3_long_factor_not_numbers": (
        "phi3",
        {"rope_parameters.long_factor": [1.0, "two"] + [1.0] * 22},
        "rope_scaling.long_factor[1]: must be a number",
    ),
    "phi3_partial_rotary_over_one": (
        "phi3",
        {"rope_parameters.partial_rotary_factor": 1.5},
        "rope_parameters.partial_rotary_factor: must be",
    ),
    "smollm3_irregular_nope_layers": (
        "smollm3",
        {"no_rope_layers": [1, 0, 1, 1]},
        "no_rope_layers: irregular NoPE layers",
    ),
    "smollm3_nope_flag_not_a_bit": (
        "smollm3",
        {"no_rope_layers": [1, 1, 2, 0]},
        "no_rope_layers[2]: must be 0 or 1, got 2",
    ),
    "smollm3_sliding_window": (
        "smollm3",
        {"use_sliding_window": True, "sliding_window": 16},
        "use_sliding_window: sliding layers of smollm3 are not supported",
    ),
    "mistral3_negative_llama4_beta": (
        "mistral3",
        {"rope_parameters.llama_4_scaling_beta": -0.1},
        "rope_parameters.llama_4_scaling_beta: must be > 0",
    ),
    "gemma2_zero_softcap": (
        "gemma2",
        {"final_logit_softcapping": 0.0},
        "final_logit_softcapping: must be > 0",
    ),
}


def edit_config(config: dict[str, Any], change: dict[str, Any]) -> dict[str, Any]:
    """config with dotted keys set (None removes the key)."""
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in config.items()}
    for dotted, value in change.items():
        *parents, key = dotted.split(".")
        target = out
        for parent in parents:
            target = target[parent]
        if value is None:
            target.pop(key, None)
        else:
            target[key] = value
    return out
