"""How to load a model: EngineOptions (every field an `ember run` flag; app/options.py builds
them from the settings file, the environment and the flags) and ModelFiles (the model app
resolved). Part of the contract engine/api.py gathers."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ember.engine.errors import EngineError
from ember.models.quants.kv_cache import KV_CACHE_TYPES
from ember.models.text.chat_format import CHAT_FORMATS

ModelFormat = Literal["gguf", "safetensors"]
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class ModelFiles:
    """A local model as app resolved it (registry name, alias or path): what the engine loads.

    The engine never looks a reference up itself: the resolver in app (app/loading.py) turns
    `EngineOptions.model` (and a `--draft MODEL`) into this. `digest` is the one content
    digest of the model's files (the registry's SHA-256, computed once per file and cached);
    it keys the disk prefix store and the torch runner's packed-weight cache.
    """

    name: str  # display name: EngineInfo.model, `ember list`
    path: Path  # the .gguf file (first shard) or the safetensors folder
    format: ModelFormat
    digest: str  # lowercase hex SHA-256

    def __post_init__(self) -> None:
        if self.format not in ("gguf", "safetensors"):
            raise EngineError(f"model {self.name}: format {self.format!r} is not gguf/safetensors")
        if not _SHA256.fullmatch(self.digest):
            raise EngineError(f"model {self.name}: digest {self.digest!r} is not a SHA-256")


Progress = Callable[[str, int, int], None]  # (stage, done, total): EngineOptions.progress
AUTO_CTX = 0  # EngineOptions.ctx: the largest context that fits free RAM (engine/context_size.py)


@dataclass(frozen=True)
class EngineOptions:
    """How to load a model; every field maps to an `ember run` flag (app/options.py builds it
    from the settings file, the environment and the flags)."""

    model: str
    runner: str = "auto"  # auto | torch | llama.cpp | remote
    device: str = "auto"  # auto | cpu | cuda | mps
    threads: int = 0  # 0 = auto: the cores free now (engine/runners/cpu_offer.py)
    ctx: int = 4096  # context limit in tokens; AUTO_CTX (0) = the largest that fits free RAM
    kv_cache: str = "f16"  # f16 | q8 | q4: the KV cache's element type (models/quants/kv_cache)
    kv_budget_bytes: int = 0  # 0 = derived from ctx
    block_size: int = 16
    sink: int = 4
    window: int = -1  # -1 = derived from ctx; 0 = sink window off (a full cache waits/preempts)
    draft: str = "none"  # none | lookup | self | MODEL
    draft_tokens: int = 4
    prefix_cache: bool = True
    max_batch: int = 8  # sequences decoded together
    prefill_chunk: int = 512  # most prompt tokens of one sequence per forward (chunked prefill)
    prefix_cache_dir: str = ""  # disk snapshots (app: <cache dir>/prefix); "" = none
    prefix_disk_bytes: int = 2 << 30  # size cap of the disk snapshots (LRU); 0 = no disk cache
    packed_cache_dir: str = ""  # torch runner's converted weights (app: <cache>/packed); "" = off
    # --runner auto's measured choice per machine and model (app: <cache dir>); "" = measure
    # at every load, keep nothing (engine/runners/runner_choice.py)
    runner_choice_dir: str = ""
    remote_url: str = ""
    remote_api_key: str = ""
    chat_format: str = "auto"  # auto | template | scaffold (base-model chat)
    # what a long wait is doing and how far: progress(stage, done, total), from the loading
    # thread (the CPU kernels, weights layer by layer) and the engine thread (a long prefill,
    # chunk by chunk); app shows it (app/progress.py). Not part of equality.
    progress: Progress | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.threads < 0:
            raise EngineError(
                f"threads={self.threads}: must be >= 0 (0 = auto: the cores free now)"
            )
        if self.ctx != AUTO_CTX and self.ctx < 16:
            raise EngineError(f"ctx={self.ctx}: must be at least 16 tokens (or 0: auto)")
        if self.kv_cache not in KV_CACHE_TYPES:
            raise EngineError(
                f"kv_cache={self.kv_cache!r}: choose one of {', '.join(KV_CACHE_TYPES)}"
            )
        if self.block_size < 1 or self.block_size & (self.block_size - 1):
            raise EngineError(f"block_size={self.block_size}: must be a power of two")
        if self.sink < 0 or self.window < -1:
            raise EngineError("sink must be >= 0 and window >= -1")
        if self.prefill_chunk < 1 or self.max_batch < 1:
            raise EngineError("prefill_chunk and max_batch must be >= 1")
        if self.kv_budget_bytes < 0 or self.prefix_disk_bytes < 0:
            raise EngineError("kv_budget_bytes and prefix_disk_bytes must be >= 0")
        if not 1 <= self.draft_tokens <= 32:
            raise EngineError(f"draft_tokens={self.draft_tokens}: must be between 1 and 32")
        if self.chat_format not in CHAT_FORMATS:
            raise EngineError(
                f"chat_format={self.chat_format!r}: choose one of {', '.join(CHAT_FORMATS)}"
            )
