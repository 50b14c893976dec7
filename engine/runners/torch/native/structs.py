"""ctypes mirrors of csrc/ember_native.h's structs (keep the field order identical)."""

from __future__ import annotations

import ctypes as C

F32P = C.POINTER(C.c_float)
I32P = C.POINTER(C.c_int32)
I64P = C.POINTER(C.c_int64)
MAX_PARTS = 3

# GGML type ids the kernels multiply in place (gguf.GGMLQuantizationType values)
F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, BF16 = 0, 1, 2, 3, 6, 7, 8, 12, 13, 14, 30
NATIVE_TYPES = frozenset({F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, BF16})
BLOCK_COLS = {Q4_0: 32, Q4_1: 32, Q5_0: 32, Q5_1: 32, Q8_0: 32, Q4_K: 256, Q5_K: 256, Q6_K: 256}

KV_F32, KV_BF16, KV_F16, KV_I8 = 0, 1, 2, 3


class EmMat(C.Structure):
    _fields_ = [
        ("data", C.c_void_p),
        ("row_bytes", C.c_int64),
        ("type", C.c_int32),
        ("rows", C.c_int32),
        ("cols", C.c_int32),
        ("pad_", C.c_int32),
    ]


class EmLinear(C.Structure):
    _fields_ = [
        ("part", EmMat * MAX_PARTS),
        ("n_parts", C.c_int32),
        ("out_features", C.c_int32),
        ("bias", F32P),
        ("out_map", I32P),
    ]


class EmLayer(C.Structure):
    _fields_ = [
        ("qkv", EmLinear),
        ("o", EmLinear),
        ("gate_up", EmLinear),
        ("down", EmLinear),
        ("attn_norm", F32P),
        ("ffn_norm", F32P),
        ("post_attn_norm", F32P),
        ("post_ffn_norm", F32P),
        ("q_norm", F32P),
        ("k_norm", F32P),
        ("rope", C.c_int32),
        ("window", C.c_int32),
        ("k_pool", C.c_void_p),
        ("v_pool", C.c_void_p),
        ("k_scale", F32P),
        ("v_scale", F32P),
        ("moe", C.c_void_p),  # em_moe* (native/moe.py) or NULL
    ]


class EmModel(C.Structure):
    _fields_ = [
        ("n_layers", C.c_int32),
        ("hidden", C.c_int32),
        ("n_heads", C.c_int32),
        ("n_kv", C.c_int32),
        ("head_dim", C.c_int32),
        ("ffn", C.c_int32),
        ("vocab", C.c_int32),
        ("act", C.c_int32),
        ("kv_type", C.c_int32),
        ("block_size", C.c_int32),
        ("norm_eps", C.c_float),
        ("attn_scale", C.c_float),
        ("attn_softcap", C.c_float),
        ("final_softcap", C.c_float),
        ("embed_scale", C.c_float),
        ("embed", EmMat),
        ("head", EmLinear),
        ("out_norm", F32P),
        ("layers", C.POINTER(EmLayer)),
        ("rope_dim", C.c_int32),
        ("pad_", C.c_int32),
    ]


class EmStep(C.Structure):
    _fields_ = [
        ("n_tokens", C.c_int32),
        ("n_threads", C.c_int32),
        ("token_ids", I32P),
        ("positions", I32P),
        ("slots", I64P),
        ("key_end", I32P),
        ("table", I32P),
        ("blocks", I32P),
        ("n_rows", C.c_int32),
        ("rows", I32P),
        ("inv_freq", F32P * 2),
        ("rope_factor", C.c_float * 2),
        ("q_scale", F32P),
    ]


def declare(lib: C.CDLL) -> None:
    """Argument and result types of the exported functions."""
    lib.em_supported.argtypes = [C.c_int32]
    lib.em_linear_forward.argtypes = [
        C.POINTER(EmLinear),
        C.c_void_p,
        C.c_int64,
        C.c_int32,
        C.c_void_p,
        C.c_int64,
        C.c_int32,
    ]
    lib.em_linear_forward.restype = C.c_int
    lib.em_dequant_rows.argtypes = [C.POINTER(EmMat), C.c_int64, C.c_int64, C.c_void_p, C.c_int32]
    lib.em_dequant_rows_bf16.argtypes = [
        C.POINTER(EmMat), C.c_int64, C.c_int64, C.c_void_p, C.c_void_p, C.c_int32,
    ]  # fmt: skip
    lib.em_gather_rows.argtypes = [C.POINTER(EmMat), I32P, C.c_int32, C.c_void_p, C.c_float]
    lib.em_forward.argtypes = [C.POINTER(EmModel), C.POINTER(EmStep), C.c_void_p]
    lib.em_forward.restype = C.c_int
    lib.em_set_gemm_min_rows.argtypes = [C.c_int32]
    lib.em_gemm_min_rows.restype = C.c_int32
    lib.em_gemm_ok.argtypes = [C.POINTER(EmLinear)]
