"""The crafted-bad-GGUF corpus: each case edits a valid tiny file's spec and names the error.

BAD_CASES: case id -> (edit, fragment the ModelFileError message must contain).
TRUNCATION_POINTS(sections) -> cut offsets inside and at the start of every section.
HUGE_DECLARED: cases that declare enormous sizes (the memory test runs these).
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from tests.models.files.badfiles.layout import (
    ARRAY,
    BOOL,
    FLOAT32,
    STRING,
    U32,
    GGUFSpec,
    TensorSpec,
    gstr,
    kv,
    kv_str,
    kv_u32,
    u32,
    u64,
)

Edit = Callable[[GGUFSpec], None]


def _set(attr: str, value: object) -> Edit:
    return lambda s: setattr(s, attr, value)


def _add_kv(encoded: bytes, first: bool = True) -> Edit:
    return lambda s: s.kvs.insert(0, encoded) if first else s.kvs.append(encoded)


def _tensor(name: str, **changes: object) -> Edit:
    def edit(s: GGUFSpec) -> None:
        t = s.tensor(name)
        for attr, value in changes.items():
            setattr(t, attr, value)

    return edit


def _second_tensor(**changes: object) -> Edit:
    def edit(s: GGUFSpec) -> None:
        for attr, value in changes.items():
            setattr(s.tensors[1], attr, value(s) if callable(value) else value)

    return edit


def _drop_tensor(name: str) -> Edit:
    return lambda s: s.tensors.remove(s.tensor(name))


def _append_tensor(name: str, ne: list[int], nbytes: int) -> Edit:
    """A new F32 tensor after the last one (its bytes appended, aligned)."""

    def edit(s: GGUFSpec) -> None:
        offset = len(s.data) + (-len(s.data) % s.alignment)
        s.data = s.data + b"\0" * (offset - len(s.data) + nbytes)
        s.tensors.append(TensorSpec(name.encode(), ne, 0, offset))

    return edit


def _push_last_past_end(s: GGUFSpec) -> None:
    s.tensors[-1].offset += 1 << 20


def _alignment(value: bytes) -> Edit:
    return _add_kv(value)


HUGE = 1 << 62
BAD_CASES: dict[str, tuple[Edit, str]] = {
    # file identity
    "bad_magic": (_set("magic", b"GGML"), "not a GGUF file"),
    "version_1": (_set("version", 1), "unsupported GGUF version 1"),
    "version_4": (_set("version", 4), "unsupported GGUF version 4"),
    "big_endian": (_set("version", 0x03000000), "big-endian"),
    # counts bounded by the bytes left
    "kv_count_huge": (_set("n_kv", HUGE), "metadata entries declared"),
    "tensor_count_huge": (_set("n_tensors", HUGE), "tensors declared"),
    "kv_count_too_many": (_set("n_kv", 200), "exceeds the limit"),
    # keys and values
    "key_length_huge": (_add_kv(u64(HUGE) + b"k" * 16), "exceeds the limit"),
    "empty_key": (_add_kv(kv_u32("", 1)), "empty metadata key"),
    "duplicate_key": (
        _add_kv(kv_str("general.name", "again"), first=False),
        "duplicate metadata key general.name",
    ),
    "key_not_utf8": (_add_kv(kv(b"\xff\xfe", U32, u32(1))), "not valid UTF-8"),
    "unknown_value_type": (_add_kv(kv("x.y", 13, u32(0))), "unknown value type 13"),
    "string_length_huge": (
        _add_kv(kv("x.s", STRING, u64(HUGE) + b"abc")),
        "truncated: metadata x.s",
    ),
    "string_not_utf8": (_add_kv(kv_str("x.s", b"\xc3\x28")), "not valid UTF-8"),
    "bool_not_0_or_1": (_add_kv(kv("x.b", BOOL, b"\x02")), "neither 0 nor 1"),
    "array_count_huge": (_add_kv(kv("x.a", ARRAY, u32(U32) + u64(HUGE))), "declares"),
    "string_array_huge": (_add_kv(kv("x.a", ARRAY, u32(STRING) + u64(HUGE >> 4))), "declares"),
    "string_in_array_huge": (
        _add_kv(kv("x.a", ARRAY, u32(STRING) + u64(2) + gstr("ok") + u64(HUGE))),
        "truncated: metadata x.a[1]",
    ),
    "nested_array": (
        _add_kv(kv("x.a", ARRAY, u32(ARRAY) + u64(1) + u32(U32) + u64(0))),
        "nested arrays",
    ),
    "array_unknown_type": (_add_kv(kv("x.a", ARRAY, u32(42) + u64(1))), "unknown value type 42"),
    # alignment
    "alignment_not_pow2": (_alignment(kv_u32("general.alignment", 48)), "not a power of two"),
    "alignment_zero": (_alignment(kv_u32("general.alignment", 0)), "not a power of two"),
    "alignment_huge": (_alignment(kv_u32("general.alignment", 1 << 20)), "not a power of two"),
    "alignment_string": (_alignment(kv_str("general.alignment", "32")), "must be an integer"),
    # tensor infos
    "tensor_name_duplicate": (_second_tensor(name=b"token_embd.weight"), "duplicate tensor name"),
    "tensor_name_64_bytes": (_second_tensor(name=b"x" * 64), "exceeds the limit of 63"),
    "tensor_name_empty": (_second_tensor(name=b""), "empty name"),
    "tensor_no_dims": (_second_tensor(ne=[]), "0 dimensions"),
    "tensor_five_dims": (_second_tensor(ne=[64, 1, 1, 1, 1]), "5 dimensions"),
    "tensor_zero_dim": (_tensor("token_embd.weight", ne=[64, 0]), "zero dimension"),
    "tensor_elements_overflow": (
        _tensor("token_embd.weight", ne=[1 << 32, 1 << 32]),
        "overflows int64",
    ),
    "tensor_unknown_type": (_second_tensor(qtype=99), "unknown tensor type 99"),
    "tensor_removed_type": (_second_tensor(qtype=4), "unknown tensor type 4"),
    "tensor_not_block_multiple": (
        _tensor("token_embd.weight", ne=[48, 32]),
        "not a multiple of Q8_0 block 32",
    ),
    "tensor_offset_unaligned": (
        _second_tensor(offset=lambda s: s.tensors[1].offset + 1),
        "not aligned",
    ),
    "tensor_overlap": (_second_tensor(offset=0), "overlaps or precedes token_embd.weight"),
    "tensor_past_end": (_push_last_past_end, "truncated: tensor"),
    # hyperparameters and architecture checks
    "no_architecture": (
        lambda s: s.drop_kv("general.architecture"),
        "general.architecture: missing",
    ),
    "no_block_count": (lambda s: s.drop_kv("llama.block_count"), "llama.block_count: missing"),
    "kv_heads_not_dividing": (
        lambda s: s.set_kv(
            "llama.attention.head_count_kv", kv_u32("llama.attention.head_count_kv", 3)
        ),
        "does not divide",
    ),
    "norm_eps_nan": (
        lambda s: s.set_kv(
            "llama.attention.layer_norm_rms_epsilon",
            kv("llama.attention.layer_norm_rms_epsilon", FLOAT32, struct.pack("<f", float("nan"))),
        ),
        "norm_eps",
    ),
    "missing_tensor": (_drop_tensor("blk.1.ffn_up.weight"), "missing tensor blk.1.ffn_up.weight"),
    "wrong_shape": (
        _tensor("blk.0.ffn_up.weight", ne=[64, 96]),
        "blk.0.ffn_up.weight has shape (96, 64), expected (128, 64)",
    ),
    "layers_more_than_tensors": (
        lambda s: s.set_kv("llama.block_count", kv_u32("llama.block_count", 3)),
        "missing tensor blk.2.",
    ),
}

# the same checks on a mixture-of-experts file (quick_gguf's qwen3moe: 4 experts, 2 used)
MOE_BAD_CASES: dict[str, tuple[Edit, str]] = {
    "expert_count_zero": (
        lambda s: s.set_kv("qwen3moe.expert_count", kv_u32("qwen3moe.expert_count", 0)),
        "qwen3moe.expert_count: must be in 1..",
    ),
    "more_experts_used_than_exist": (
        lambda s: s.set_kv("qwen3moe.expert_used_count", kv_u32("qwen3moe.expert_used_count", 5)),
        "qwen3moe.expert_used_count: 5 is more than expert_count 4",
    ),
    "no_expert_count": (
        lambda s: s.drop_kv("qwen3moe.expert_count"),
        "qwen3moe.expert_count: missing",
    ),
    "missing_expert_tensor": (
        _drop_tensor("blk.1.ffn_down_exps.weight"),
        "missing tensor blk.1.ffn_down_exps.weight",
    ),
    "misshapen_expert_tensor": (
        _tensor("blk.0.ffn_gate_exps.weight", ne=[64, 64, 3]),
        "blk.0.ffn_gate_exps.weight has shape (3, 64, 64), expected (4, 64, 64)",
    ),
    "missing_router": (
        _drop_tensor("blk.0.ffn_gate_inp.weight"),
        "missing tensor blk.0.ffn_gate_inp.weight",
    ),
    "router_bias_wrong_length": (
        _append_tensor("blk.0.ffn_gate_inp.bias", [3], 12),
        "blk.0.ffn_gate_inp.bias has shape (3,), expected (4,)",
    ),
}

HUGE_DECLARED = [
    "kv_count_huge",
    "tensor_count_huge",
    "key_length_huge",
    "string_length_huge",
    "array_count_huge",
    "string_array_huge",
    "string_in_array_huge",
    "tensor_elements_overflow",
]


def truncation_points(sections: dict[str, int]) -> dict[str, int]:
    """Cut offsets: in the middle of and at the start of each header section, and in the data."""
    kv0, kv1 = sections["kv0"], sections["kv1"]
    info, data, end = sections["tensor_info"], sections["data"], sections["end"]
    return {
        "in_magic": 2,
        "in_version": 6,
        "in_tensor_count": 12,
        "in_kv_count": 20,
        "at_kv": sections["kv"],
        "in_first_key_length": kv0 + 3,
        "in_first_key": kv0 + 10,
        "in_first_value": kv1 - 2,
        "in_last_kv": info - 5,
        "at_tensor_info": info,
        "in_tensor_info": info + 20,
        "in_padding": sections["padding"] + 1 if data > sections["padding"] + 1 else data - 1,
        "at_data": data,
        "in_data": (data + end) // 2,
        "one_byte_short": end - 1,
    }
