"""The KV cache types a user chooses (`--kv-cache`, the kv_cache setting) and their sizes.

    f16  16-bit keys and values: each runner's full-precision cache (the default)
    q8   8-bit: llama.cpp's q8_0 blocks (32 int8 codes + one f16 scale = 34 bytes per 32
         values), or the torch runner's int8 pools (one float32 scale per token and head)
    q4   4-bit: llama.cpp's q4_0 blocks (16 bytes of nibbles + one f16 scale = 18 bytes per 32
         values); the torch runner has no 4-bit pools

Each runner maps a name onto its own cache type (LlamaCppConfig.from_options, the torch
runner's TorchOptions) and reports its exact bytes per token; the figures here are for
estimates made before a model is loaded (models/hub/fit.py).
"""

from __future__ import annotations

KV_CACHE_TYPES = ("f16", "q8", "q4")
DEFAULT_KV_CACHE = "f16"
# bytes per cached K or V value, in llama.cpp's block formats (the default GGUF runner on CPU)
KV_ELEMENT_BYTES = {"f16": 2.0, "q8": 34 / 32, "q4": 18 / 32}


def kv_element_bytes(kv_cache: str) -> float:
    """Bytes per cached K or V value of a KV cache type; ValueError for an unknown name."""
    if kv_cache not in KV_ELEMENT_BYTES:
        raise ValueError(f"kv cache {kv_cache!r}: choose one of {', '.join(KV_CACHE_TYPES)}")
    return KV_ELEMENT_BYTES[kv_cache]
