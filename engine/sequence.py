"""Sequence: one generation's token ids, status, block table and cache counters (no torch)."""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from enum import Enum

from ember.engine.api import SamplingParams

_seq_ids = itertools.count(1)


class SeqStatus(Enum):
    """Where a sequence is in its life."""

    WAITING = "waiting"  # queued: no blocks (new, or preempted and due for recompute)
    RUNNING = "running"  # holds blocks; prefilling or decoding
    FINISHED = "finished"


@dataclass
class Sequence:
    """One generation. Managers change it; only a runner turns it into tensors.

    Cache layout: the KV cache holds token_ids[:num_sink_kept] followed by
    token_ids[num_sink_kept + num_evicted : num_processed]; cache index == RoPE position.
    After sink eviction the logical range [num_sink_kept, num_sink_kept + num_evicted) is gone.
    """

    prompt_ids: list[int]
    sampling: SamplingParams = field(default_factory=SamplingParams)
    seq_id: int = field(default_factory=lambda: next(_seq_ids))
    request_id: int = 0
    token_ids: list[int] = field(default_factory=list)  # prompt + generated
    status: SeqStatus = SeqStatus.WAITING
    block_table: list[int] = field(default_factory=list)  # physical block per cache block
    block_hashes: list[bytes] = field(default_factory=list)  # chain hash of each hashed full block
    num_processed: int = 0  # tokens of token_ids whose KV was computed (kept or evicted)
    num_evicted: int = 0  # tokens dropped by the sink window (a contiguous logical range)
    num_sink_kept: int = 0  # cache tokens kept in front of the evicted range (0 until eviction)
    num_prefix_hit_tokens: int = 0  # prompt tokens served from the prefix cache (RAM or disk)
    num_preemptions: int = 0
    finish_reason: str | None = None
    error: str = ""
    last_reason: str = ""  # last scheduler decision about this sequence (wait/preempt/evict)
    arrival_s: float = field(default_factory=time.perf_counter)
    first_scheduled_s: float = 0.0
    first_token_s: float = 0.0
    finish_s: float = 0.0

    def __post_init__(self) -> None:
        if not self.token_ids:
            self.token_ids = list(self.prompt_ids)

    @property
    def num_prompt_tokens(self) -> int:
        return len(self.prompt_ids)

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def output_ids(self) -> list[int]:
        return self.token_ids[len(self.prompt_ids) :]

    @property
    def num_kv_tokens(self) -> int:
        """Tokens in the KV cache now; also the cache index (and position) of the next token."""
        return self.num_processed - self.num_evicted

    @property
    def num_pending(self) -> int:
        """Tokens appended but not yet run through the model (prompt rest, or the last sample)."""
        return len(self.token_ids) - self.num_processed

    @property
    def is_prefilling(self) -> bool:
        return self.num_processed < len(self.prompt_ids)

    @property
    def is_finished(self) -> bool:
        return self.status is SeqStatus.FINISHED

    def kv_token_ids(self) -> list[int]:
        """The token ids in the KV cache, in cache order."""
        if not self.num_evicted:
            return self.token_ids[: self.num_processed]
        resume = self.num_sink_kept + self.num_evicted
        return self.token_ids[: self.num_sink_kept] + self.token_ids[resume : self.num_processed]

    def reset_for_recompute(self) -> None:
        """Forget all cache state (after preemption); prompt and output ids are kept."""
        self.block_table = []
        self.block_hashes = []
        self.num_processed = 0
        self.num_evicted = 0
        self.num_sink_kept = 0
        self.status = SeqStatus.WAITING
