"""The torch runner's KV pool element for a user's KV cache type (models/quants/kv_cache.py).

Torch-free, so the runner factory can refuse an impossible choice before anything loads."""

from __future__ import annotations

from ember.engine.errors import EngineError


def torch_kv_dtype(kv_cache: str) -> str:
    """TorchOptions.kv_dtype for a KV cache type: f16 -> the runner's 16-bit default, q8 -> int8
    pools; q4 has no torch pools (EngineError)."""
    if kv_cache == "q4":
        raise EngineError(
            "--kv-cache q4: the torch runner's KV cache is f16 or q8 (int8); "
            "use --kv-cache q8, or --runner llama.cpp for q4"
        )
    return "int8" if kv_cache == "q8" else "auto"
