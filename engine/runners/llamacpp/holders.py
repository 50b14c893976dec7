"""HolderPool: llama.cpp sequence ids as holders of engine KV blocks (the membership layer).

llama.cpp has no block addresses: its unified KV cache holds cells, each with one position and a
set of sequence ids. So a block is "the cells of sequence s with positions [p0, p1)". The pool
keeps, per engine block id, its first position, its token ids and the llama sequences (holders)
whose memory includes its cells; BlockMap (blocks.py) builds the runner's operations on
it. No llama_cpp import here: `SeqMemory` is the seam (tests fake it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from ember.engine.errors import EngineError


class SeqMemory(Protocol):
    """The llama.cpp memory operations the map needs (llama_memory_* and llama_state_seq_*)."""

    def seq_rm(self, seq: int, p0: int, p1: int) -> None: ...

    def seq_cp(self, src: int, dst: int, p0: int, p1: int) -> None: ...

    def seq_add(self, seq: int, p0: int, p1: int, delta: int) -> None: ...

    def state_get(self, seq: int) -> bytes: ...

    def state_set(self, seq: int, data: bytes) -> None:
        """Replace seq's cells with data from state_get; raise EngineError when it cannot."""
        ...


@dataclass
class BlockLoc:
    """Where one engine block lives in llama.cpp memory."""

    pos_start: int  # position of the block's first token
    token_ids: list[int]  # its tokens so far (kept even when the cells are dropped)
    holders: set[int] = field(default_factory=set)  # llama seq ids whose cells include it

    @property
    def pos_end(self) -> int:
        return self.pos_start + len(self.token_ids)

    def overlaps(self, p0: int, p1: int) -> bool:
        return self.pos_start < p1 and p0 < self.pos_end


@dataclass
class Holder:
    """One llama sequence: a live engine sequence, or (engine_seq None) a keeper of cached blocks."""

    llama_seq: int
    engine_seq: int | None
    blocks: list[int] = field(default_factory=list)
    last_used: int = 0


class HolderPool:
    """Engine block id -> BlockLoc; llama seq id -> Holder; free ids; membership moves."""

    def __init__(self, memory: SeqMemory, block_size: int, num_seqs: int) -> None:
        if num_seqs < 2:
            raise EngineError("llama.cpp runner needs at least 2 sequence slots")
        self.memory = memory
        self.block_size = block_size
        self.scratch_seq = num_seqs - 1  # temporary copies for state get/set
        self.blocks: dict[int, BlockLoc] = {}
        self.holders: dict[int, Holder] = {}  # llama seq id -> holder
        self.live: dict[int, Holder] = {}  # engine seq id -> its holder
        self._free = list(range(num_seqs - 2, -1, -1))  # pop() hands out 0 first
        self._clock = 0
        self.num_recomputed = 0  # tokens re-decoded because their cells had been dropped

    # ---- sequence slots ------------------------------------------------------------------
    def _tick(self, holder: Holder) -> None:
        self._clock += 1
        holder.last_used = self._clock

    def _new_holder(self, engine_seq: int | None, *, evict: bool) -> Holder | None:
        if not self._free and evict:
            self._evict_keeper()
        if not self._free:
            return None
        holder = Holder(self._free.pop(), engine_seq)
        self.holders[holder.llama_seq] = holder
        self._tick(holder)
        return holder

    def _evict_keeper(self) -> None:
        keepers = [h for h in self.holders.values() if h.engine_seq is None]
        if not keepers:
            return
        victim = min(keepers, key=lambda h: h.last_used)
        for block_id in list(victim.blocks):
            self._drop(victim, block_id)

    def _retire_if_empty(self, holder: Holder) -> None:
        if holder.engine_seq is None and not holder.blocks:
            self.memory.seq_rm(holder.llama_seq, -1, -1)
            del self.holders[holder.llama_seq]
            self._free.append(holder.llama_seq)

    def live_holder(self, engine_seq: int) -> Holder:
        """The llama sequence of an engine sequence (a new one on first sight)."""
        holder = self.live.get(engine_seq)
        if holder is None:
            holder = self._new_holder(engine_seq, evict=True)
            if holder is None:
                raise EngineError(
                    f"llama.cpp runner: no free sequence slot for sequence {engine_seq} "
                    f"({len(self.live)} running); raise max_sequences"
                )
            self.live[engine_seq] = holder
        self._tick(holder)
        return holder

    # ---- membership ------------------------------------------------------------------------
    def _drop(self, holder: Holder, block_id: int) -> None:
        """Remove holder's share of a block's cells (the cells die with their last holder)."""
        loc = self.blocks[block_id]
        self.memory.seq_rm(holder.llama_seq, loc.pos_start, loc.pos_end)
        loc.holders.discard(holder.llama_seq)
        holder.blocks.remove(block_id)
        self._retire_if_empty(holder)

    def _reset(self, block_id: int) -> None:
        """The engine is writing a block afresh: its old cells go from every holder."""
        loc = self.blocks.get(block_id)
        if loc is None:
            return
        for seq in list(loc.holders):
            self._drop(self.holders[seq], block_id)
        del self.blocks[block_id]

    def _keeper_for(self, p0: int, p1: int) -> Holder | None:
        """A keeper with no block overlapping [p0, p1), or a new one while slots are spare."""
        for holder in self.holders.values():
            if holder.engine_seq is None and not any(
                self.blocks[b].overlaps(p0, p1) for b in holder.blocks
            ):
                return holder
        return self._new_holder(None, evict=False)

    def _let_go(self, holder: Holder, block_id: int) -> None:
        """A live sequence no longer has block_id: park its cells in a keeper if it was the last."""
        loc = self.blocks.get(block_id)
        if loc is None:
            holder.blocks.remove(block_id)
            return
        if loc.holders == {holder.llama_seq} and loc.token_ids:
            keeper = self._keeper_for(loc.pos_start, loc.pos_end)
            if keeper is not None:
                self.memory.seq_cp(holder.llama_seq, keeper.llama_seq, loc.pos_start, loc.pos_end)
                loc.holders.add(keeper.llama_seq)
                keeper.blocks.append(block_id)
        self._drop(holder, block_id)

    def _trim(self, block_id: int, num_tokens: int) -> None:
        """Forget a block's tokens from num_tokens on (rolled-back drafts), in every holder."""
        loc = self.blocks[block_id]
        for seq in loc.holders:
            self.memory.seq_rm(seq, loc.pos_start + num_tokens, loc.pos_end)
        del loc.token_ids[num_tokens:]

    # ---- state bytes ---------------------------------------------------------------------
    def _export(self, parts: list[tuple[int, int]]) -> bytes:
        """State bytes of (block, num_tokens) parts gathered into the scratch sequence."""
        scratch = self.scratch_seq
        self.memory.seq_rm(scratch, -1, -1)
        try:
            for block_id, count in parts:
                loc = self.blocks[block_id]
                if not loc.holders:
                    raise EngineError(f"block {block_id} is not in llama.cpp memory")
                src = next(iter(loc.holders))
                self.memory.seq_cp(src, scratch, loc.pos_start, loc.pos_start + count)
            return self.memory.state_get(scratch)
        finally:
            self.memory.seq_rm(scratch, -1, -1)

    def _import(self, data: bytes, keeper: Holder, block_ids: list[int]) -> None:
        """Load state bytes as new cells, held by keeper, for blocks already in the map."""
        scratch = self.scratch_seq
        try:
            self.memory.state_set(scratch, data)
            for block_id in block_ids:
                loc = self.blocks[block_id]
                self.memory.seq_cp(scratch, keeper.llama_seq, loc.pos_start, loc.pos_end)
                loc.holders.add(keeper.llama_seq)
                keeper.blocks.append(block_id)
        finally:
            self.memory.seq_rm(scratch, -1, -1)
            self._retire_if_empty(keeper)
