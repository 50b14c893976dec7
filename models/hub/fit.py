"""Will a model fit this machine? RAM against weights + KV cache at the default context, disk
against the bytes still to download.

KV bytes = 2 (K and V) x layers x kv_heads x head_dim x context x bytes per value of the chosen
KV cache type (models/quants/kv_cache.py: f16 2, q8 34/32, q4 18/32; the kv_cache setting).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

from ember.models.hub.moe_fit import CONFIG_KEYS, GGUF_KEYS, Experts, experts_of
from ember.models.quants.kv_cache import DEFAULT_KV_CACHE, kv_element_bytes

RUNTIME_OVERHEAD_BYTES = 300 * 1000 * 1000  # interpreter, torch/llama.cpp, buffers
HEADER_PEEK_BYTES = 256 << 10  # GGUF hyperparameters sit at the start, before the vocabulary


@dataclass(frozen=True)
class Shape:
    """The hyperparameters that size the KV cache."""

    layers: int
    kv_heads: int
    head_dim: int
    experts: Experts | None = None  # a mixture of experts: total vs active parameters

    def kv_bytes_per_token(self, kv_cache: str = DEFAULT_KV_CACHE) -> int:
        """K and V bytes of one token over all layers, in a KV cache type (f16, q8, q4)."""
        values = 2 * self.layers * self.kv_heads * self.head_dim
        return int(values * kv_element_bytes(kv_cache))

    def kv_bytes(self, ctx: int, kv_cache: str = DEFAULT_KV_CACHE) -> int:
        """K and V for ctx tokens in a KV cache type."""
        return self.kv_bytes_per_token(kv_cache) * ctx


@dataclass(frozen=True)
class FitEstimate:
    """Bytes needed and available, and a verdict for RAM and for disk."""

    weights_bytes: int
    kv_bytes: int | None
    ctx: int
    ram_needed_bytes: int
    ram_available_bytes: int | None
    ram_total_bytes: int | None
    disk_needed_bytes: int
    disk_free_bytes: int
    kv_cache: str = DEFAULT_KV_CACHE
    experts: Experts | None = None

    @property
    def ram_working_set_bytes(self) -> int:
        """RAM with a MoE model's experts left mmap'd: one token's share of the weights plus
        KV and runtime (a dense model: ram_needed_bytes)."""
        if self.experts is None:
            return self.ram_needed_bytes
        cold = self.weights_bytes - self.experts.working_set_bytes(self.weights_bytes)
        return self.ram_needed_bytes - cold

    @property
    def ram_verdict(self) -> str:
        """'fits', 'tight' (only with other programs closed), 'too big' or 'unknown'."""
        if self.ram_total_bytes is None:
            return "unknown"
        if (
            self.ram_available_bytes is not None
            and self.ram_needed_bytes <= self.ram_available_bytes
        ):
            return "fits"
        return "tight" if self.ram_needed_bytes <= self.ram_total_bytes else "too big"

    @property
    def disk_ok(self) -> bool:
        return self.disk_needed_bytes <= self.disk_free_bytes

    def to_dict(self) -> dict[str, object]:
        """JSON-ready."""
        return {
            "weights_bytes": self.weights_bytes,
            "kv_bytes": self.kv_bytes,
            "ctx": self.ctx,
            "kv_cache": self.kv_cache,
            "ram_needed_bytes": self.ram_needed_bytes,
            "ram_available_bytes": self.ram_available_bytes,
            "ram_verdict": self.ram_verdict,
            "disk_needed_bytes": self.disk_needed_bytes,
            "disk_free_bytes": self.disk_free_bytes,
            "disk_ok": self.disk_ok,
            "ram_working_set_bytes": self.ram_working_set_bytes,
            "moe": self.experts.to_dict() if self.experts else None,
        }


def memory_bytes() -> tuple[int | None, int | None]:
    """(available, total) RAM in bytes; Linux /proc/meminfo, else sysconf, else unknown."""
    try:
        fields = {}
        for line in Path("/proc/meminfo").read_text().splitlines():
            key, _, rest = line.partition(":")
            fields[key] = int(rest.split()[0]) * 1024
        return fields.get("MemAvailable"), fields.get("MemTotal")
    except (OSError, ValueError, IndexError):
        pass
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        return None, int(total)
    except (ValueError, OSError, AttributeError):
        return None, None


def shape_from_gguf_header(header: bytes) -> Shape | None:
    """KV-relevant hyperparameters from the first bytes of a GGUF file."""
    from ember.models.errors import ModelFileError
    from ember.models.files.gguf_header import parse_gguf_metadata

    try:  # the first bytes of the file: entries past their end are left out
        kv = parse_gguf_metadata(header, "GGUF header", partial=True)
    except ModelFileError:
        return None
    arch = kv.get("general.architecture")
    if not arch:
        return None

    def num(key: str) -> int | None:
        value = kv.get(f"{arch}.{key}")
        return int(value) if isinstance(value, int | float) else None

    layers, heads = num("block_count"), num("attention.head_count")
    kv_heads = num("attention.head_count_kv") or heads
    head_dim = num("attention.key_length")
    if head_dim is None and heads and (width := num("embedding_length")):
        head_dim = width // heads
    if not (layers and kv_heads and head_dim):
        return None
    experts = experts_of(num, GGUF_KEYS)
    vocab = num("vocab_size")
    if experts is not None and vocab:
        experts = replace(experts, vocab=vocab)
    return Shape(layers, kv_heads, head_dim, experts)


def shape_from_config(config_text: str) -> Shape | None:
    """KV-relevant hyperparameters from a Hugging Face config.json."""
    try:
        config = json.loads(config_text)
        config = config.get("text_config", config)
        layers = int(config["num_hidden_layers"])
        heads = int(config["num_attention_heads"])
        kv_heads = int(config.get("num_key_value_heads") or heads)
        head_dim = int(config.get("head_dim") or int(config["hidden_size"]) // heads)
        experts = experts_of(lambda k: _config_int(config, k), CONFIG_KEYS)
        if experts is not None:
            experts = replace(experts, vocab=_config_int(config, "vocab_size") or 0)
    except (ValueError, KeyError, TypeError, AttributeError, ZeroDivisionError):
        return None
    return Shape(layers, kv_heads, head_dim, experts)


def _config_int(config: dict[str, object], key: str) -> int | None:
    """An integer of config.json (transformers 5.x spells num_experts num_local_experts)."""
    value = config.get(key)
    if value is None and key == "num_experts":
        value = config.get("num_local_experts")
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def estimate(
    weights_bytes: int,
    shape: Shape | None,
    ctx: int,
    disk_needed: int,
    folder: Path,
    kv_cache: str = DEFAULT_KV_CACHE,
) -> FitEstimate:
    """A FitEstimate for weights (mmap'd, so they count once) plus the KV cache at ctx tokens
    in the kv_cache type."""
    kv = shape.kv_bytes(ctx, kv_cache) if shape else None
    available, total = memory_bytes()
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    need = weights_bytes + (kv or 0) + RUNTIME_OVERHEAD_BYTES
    experts = shape.experts if shape else None
    return FitEstimate(
        weights_bytes, kv, ctx, need, available, total, disk_needed, free, kv_cache, experts
    )
