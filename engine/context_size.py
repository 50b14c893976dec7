"""`--ctx auto`: the largest context whose KV cache fits the free RAM, with a margin.

    free  = available RAM - model weights            (the weights are mmap'd: they need pages)
    room  = (free - RESERVE_BYTES) * (1 - MARGIN)     (RESERVE: interpreter, runner buffers;
                                                       MARGIN: other programs and compute scratch)
    ctx   = room // (POOL_SEQUENCES * KV bytes per token)
            capped by the model's trained context, rounded down to a multiple of ROUND_TOKENS

POOL_SEQUENCES is the engine's pool policy (engine.pool_blocks: room for two full-context
sequences), so the estimate sizes what is really allocated. A pure function of its inputs, so
it is unit-tested with made-up memory figures; the engine feeds it the loaded runner's own
bytes per token (the chosen --kv-cache type) and /proc/meminfo's MemAvailable.
"""

from __future__ import annotations

import dataclasses
import glob
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ember.engine.errors import EngineError

if TYPE_CHECKING:
    from ember.engine.api import EngineOptions, ModelFiles
    from ember.engine.runners.base import Runner

log = logging.getLogger("ember.engine")

RESERVE_BYTES = 512 << 20
MARGIN = 0.25
POOL_SEQUENCES = 2
ROUND_TOKENS = 256  # 16 blocks of 16 tokens
MIN_AUTO_TOKENS = 256


@dataclass(frozen=True)
class ContextFacts:
    """What sizes a model's KV cache: its weights, its KV bytes per token, its trained context."""

    weights_bytes: int
    kv_bytes_per_token: int  # all layers, K and V, in the chosen cache type
    trained_ctx: int  # 0 = unknown
    kv_cache: str = "f16"  # the name shown in the note

    def __post_init__(self) -> None:
        if self.weights_bytes < 0 or self.kv_bytes_per_token <= 0 or self.trained_ctx < 0:
            raise EngineError("context facts: weights >= 0, KV bytes per token > 0, trained >= 0")


@dataclass(frozen=True)
class AutoContext:
    """The chosen context and the one line that says why."""

    ctx: int
    free_bytes: int  # available RAM after the weights
    capped: bool  # the model's trained context was the limit, not the memory

    def note(self, kv_cache: str) -> str:
        """`context 32768 tokens (auto: 1.2 GiB free after weights, KV q8)`."""
        why = "the model's trained maximum; " if self.capped else ""
        gib = self.free_bytes / (1 << 30)
        return f"context {self.ctx} tokens (auto: {why}{gib:.1f} GiB free after weights, KV {kv_cache})"


def auto_context(facts: ContextFacts, available_bytes: int) -> AutoContext:
    """The largest context that fits available_bytes of free RAM (module docstring's formula);
    EngineError when not even MIN_AUTO_TOKENS fit."""
    free = available_bytes - facts.weights_bytes
    room = int(max(0, free - RESERVE_BYTES) * (1 - MARGIN))
    fits = room // (POOL_SEQUENCES * facts.kv_bytes_per_token)
    capped = 0 < facts.trained_ctx <= fits
    ctx = facts.trained_ctx if capped else fits
    ctx = ctx // ROUND_TOKENS * ROUND_TOKENS if ctx >= ROUND_TOKENS else ctx
    if ctx < MIN_AUTO_TOKENS:
        mib = max(0, free) >> 20
        raise EngineError(
            f"--ctx auto: {mib} MiB of RAM free after the weights holds fewer than "
            f"{MIN_AUTO_TOKENS} tokens of KV cache; close programs, try --kv-cache q8, or give --ctx N"
        )
    return AutoContext(ctx, max(0, free), capped)


def auto_options(
    options: EngineOptions, runner: Runner, model: ModelFiles | None
) -> tuple[EngineOptions, str]:
    """options with `--ctx auto` resolved for the loaded runner (engine/context_size.py), and
    the one line that says how."""
    from ember.models.hub.fit import memory_bytes

    available, _total = memory_bytes()
    if available is None:
        raise EngineError("--ctx auto: this system does not report its free memory; give --ctx N")
    facts = ContextFacts(
        weights_bytes=model_bytes(model.path) if model is not None else 0,
        kv_bytes_per_token=runner.info.kv_bytes_per_token,
        trained_ctx=runner.info.context_limit,
        kv_cache=options.kv_cache,
    )
    chosen = auto_context(facts, available)
    log.info("%s", chosen.note(options.kv_cache))
    return dataclasses.replace(options, ctx=chosen.ctx), chosen.note(options.kv_cache)


def model_bytes(path: Path) -> int:
    """Bytes of a model's weights on disk: a GGUF file (with its shards), or a safetensors
    folder's *.safetensors files."""
    if path.is_dir():
        return sum(p.stat().st_size for p in path.glob("*.safetensors"))
    pattern = glob.escape(path.name).replace("-00001-of-", "-*-of-")  # split GGUF shards
    shards = list(path.parent.glob(pattern))
    return sum(p.stat().st_size for p in shards) if len(shards) > 1 else path.stat().st_size
