"""Scheduler: waiting/running queues, chunked prefill, continuous batching, preemption, abort.

Each step it plans one ForwardBatch: running sequences first (a decode token, or the next
prefill chunk), then waiting sequences in arrival order while their blocks fit and the token
budget lasts. A sequence that does not fit waits (reason "wait"); a running one that cannot
grow preempts the newest other running sequence (reason "preempt": its blocks are freed and it
is recomputed later, usually from the prefix cache); with a sink window a full cache evicts
(reason "evict"). Nothing is ever silently truncated. No torch here.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from ember.engine.block_manager import BlockManager, CopyOp
from ember.engine.errors import EngineError
from ember.engine.sequence import SeqStatus, Sequence
from ember.engine.streaming import ShiftOp, SinkWindow

log = logging.getLogger("ember.engine.scheduler")


class Proposer(Protocol):
    """Speculative decoding hook: guess up to max_tokens next tokens of a decoding sequence."""

    def propose(self, seq: Sequence, max_tokens: int) -> list[int]: ...


@dataclass(frozen=True)
class SchedulerConfig:
    """Batch limits; every field is checked at construction."""

    max_batch_seqs: int = 8
    max_batch_tokens: int = 512  # token budget of one forward
    prefill_chunk: int = 512  # most prompt tokens of one sequence per step
    max_seq_tokens: int = 4096  # ctx: cache limit of one sequence when the sink window is off
    draft_tokens: int = 0  # drafts per decode step when a proposer is set

    def __post_init__(self) -> None:
        if min(self.max_batch_seqs, self.max_batch_tokens, self.prefill_chunk) < 1:
            raise EngineError("scheduler limits must be >= 1")


@dataclass
class ScheduledSeq:
    """One sequence's share of the step."""

    seq: Sequence
    num_tokens: int  # pending tokens computed this step (prefill chunk or 1 decode token)
    draft_ids: list[int] = field(default_factory=list)  # proposer guesses appended to the step

    @property
    def token_ids(self) -> list[int]:
        start = self.seq.num_processed
        return self.seq.token_ids[start : start + self.num_tokens] + self.draft_ids


@dataclass
class SchedulerOutput:
    """The plan of one step and the KV work the runner must do before the forward."""

    scheduled: list[ScheduledSeq] = field(default_factory=list)
    copies: list[CopyOp] = field(default_factory=list)  # apply first
    shifts: list[ShiftOp] = field(default_factory=list)  # then these
    preempted: list[Sequence] = field(default_factory=list)  # runner.release() these
    finished: list[Sequence] = field(default_factory=list)  # ended by the scheduler (context full)
    evicted_tokens: int = 0


class Scheduler:
    """Decides, per step, which sequences run which tokens."""

    def __init__(
        self,
        config: SchedulerConfig,
        blocks: BlockManager,
        sink_window: SinkWindow | None = None,
        proposer: Proposer | None = None,
        draft_filter: Callable[[Sequence, list[int]], list[int]] | None = None,
    ) -> None:
        self.config = config
        self.blocks = blocks
        self.sink_window = sink_window if sink_window and sink_window.enabled else None
        self.proposer = proposer
        self.draft_filter = draft_filter  # drops drafts a request's constraint forbids
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []

    @property
    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    @property
    def _chunk(self) -> int:
        chunk = self.config.prefill_chunk
        if self.sink_window:
            chunk = min(chunk, self.sink_window.max_step_tokens)
        return chunk

    def add(self, seq: Sequence) -> None:
        """Queue a new sequence; a prompt that can never fit is refused here, not truncated."""
        if not self.sink_window and seq.num_tokens >= self.config.max_seq_tokens:
            raise EngineError(
                f"prompt of {seq.num_tokens} tokens does not fit ctx={self.config.max_seq_tokens}"
                " (raise --ctx, or turn on the sink window)"
            )
        seq.status = SeqStatus.WAITING
        self.waiting.append(seq)

    def abort(self, seq_id: int) -> Sequence | None:
        """Remove a sequence at once and free its blocks; None if unknown."""
        for seq in list(self.waiting):
            if seq.seq_id == seq_id:
                self.waiting.remove(seq)
                return self._finish(seq, "abort")
        for seq in self.running:
            if seq.seq_id == seq_id:
                return self._finish(seq, "abort")
        return None

    def finish(self, seq: Sequence, reason: str) -> None:
        """End a running sequence (stop, length, error) and free its blocks."""
        self._finish(seq, reason)

    def _finish(self, seq: Sequence, reason: str) -> Sequence:
        if seq in self.running:
            self.running.remove(seq)
        self.blocks.free(seq)
        seq.status = SeqStatus.FINISHED
        seq.finish_reason = seq.finish_reason or reason
        return seq

    # ---- planning -------------------------------------------------------------------------
    def schedule(self) -> SchedulerOutput:
        """Plan one step; the caller runs it and then records what was computed."""
        out = SchedulerOutput()
        budget = self.config.max_batch_tokens
        for seq in list(self.running):
            if budget <= 0:
                break
            if seq not in self.running:  # preempted by an earlier sequence this step
                continue
            item = self._plan_running(seq, budget, out)
            if item is not None:
                out.scheduled.append(item)
                budget -= len(item.token_ids)
        while self.waiting and budget > 0 and len(self.running) < self.config.max_batch_seqs:
            item = self._admit(self.waiting[0], budget, out)
            if item is None:
                break  # first come, first served: later requests do not jump the queue
            self.waiting.popleft()
            out.scheduled.append(item)
            budget -= len(item.token_ids)
        return out

    def _plan_running(
        self, seq: Sequence, budget: int, out: SchedulerOutput
    ) -> ScheduledSeq | None:
        if seq.num_pending <= 0:
            raise EngineError(f"internal: running sequence {seq.seq_id} has nothing to compute")
        num_tokens = min(seq.num_pending, self._chunk, budget)
        drafts = self._drafts(seq, budget - num_tokens)
        step_tokens = num_tokens + len(drafts)
        if not self.sink_window and seq.num_kv_tokens + step_tokens > self.config.max_seq_tokens:
            drafts = []
            if seq.num_kv_tokens + num_tokens > self.config.max_seq_tokens:
                seq.last_reason = "context full"
                seq.finish_reason = "length"
                out.finished.append(self._finish(seq, "length"))
                return None
            step_tokens = num_tokens
        self._evict(seq, step_tokens, out)
        while not self.blocks.can_append(seq, step_tokens):
            # Only sequences not yet planned this step (after seq in the queue) are victims.
            victim = self.running[-1]
            if victim is seq and len(self.running) == 1:
                raise EngineError(f"KV pool too small for one sequence (seq {seq.seq_id})")
            self._preempt(victim, out)
            if victim is seq:
                return None
        out.copies += self.blocks.append(seq, step_tokens)
        return ScheduledSeq(seq, num_tokens, drafts)

    def _admit(self, seq: Sequence, budget: int, out: SchedulerOutput) -> ScheduledSeq | None:
        hit_tokens = len(self.blocks.match_prefix(seq.token_ids)) * self.blocks.block_size
        num_tokens = min(seq.num_tokens - hit_tokens, self._chunk, budget)
        if not self.blocks.can_allocate(seq, hit_tokens + num_tokens):
            if seq.last_reason != "wait":
                log.info("seq %d waits: its KV blocks do not fit yet", seq.seq_id)
            seq.last_reason = "wait"
            return None
        hit_tokens = self.blocks.allocate(seq, hit_tokens + num_tokens)
        if not seq.num_preemptions:
            seq.num_prefix_hit_tokens = min(hit_tokens, seq.num_prompt_tokens)
        seq.status = SeqStatus.RUNNING
        self.running.append(seq)
        self.grow(seq, num_tokens, out)  # appends nothing unless eviction shrank it
        return ScheduledSeq(seq, num_tokens)

    def grow(self, seq: Sequence, num_tokens: int, out: SchedulerOutput) -> None:
        """Make room for num_tokens more of seq: sink-window eviction, then blocks appended
        (the caller knows they fit); the runner's KV work (copies, shifts) goes to out."""
        self._evict(seq, num_tokens, out)
        out.copies += self.blocks.append(seq, num_tokens)

    def _drafts(self, seq: Sequence, budget: int) -> list[int]:
        if self.proposer is None or seq.num_pending != 1 or seq.is_prefilling:
            return []
        limit = min(self.config.draft_tokens, budget)
        if self.sink_window:
            limit = min(limit, self.sink_window.max_step_tokens - 1)
        if limit <= 0:
            return []
        drafts = self.proposer.propose(seq, limit)[:limit]
        return self.draft_filter(seq, drafts) if self.draft_filter else drafts

    def _evict(self, seq: Sequence, num_new_tokens: int, out: SchedulerOutput) -> None:
        if not self.sink_window:
            return
        eviction = self.sink_window.evict(seq, num_new_tokens, self.blocks)
        if eviction is None:
            return
        seq.last_reason = "evict"
        log.debug("seq %d evicts %d tokens after its sinks", seq.seq_id, eviction.num_tokens)
        out.evicted_tokens += eviction.num_tokens
        out.copies += eviction.copies
        if eviction.shift is not None:
            out.shifts.append(eviction.shift)

    def _preempt(self, seq: Sequence, out: SchedulerOutput) -> None:
        self.running.remove(seq)
        self.blocks.free(seq)
        seq.reset_for_recompute()
        seq.num_preemptions += 1
        seq.last_reason = "preempt"
        self.waiting.appendleft(seq)
        out.preempted.append(seq)
        out.shifts = [op for op in out.shifts if op.seq_id != seq.seq_id]
