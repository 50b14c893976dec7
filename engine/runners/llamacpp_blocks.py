"""BlockMap: the engine's KV block decisions mapped onto llama.cpp sequence memory.

llama.cpp has no block addresses: its unified KV cache holds cells, each with one position and a
set of sequence ids. So a block is "the cells of sequence s with positions [p0, p1)". The map
keeps, per engine block id, its first position, its token ids and the llama sequences (holders)
whose memory includes its cells. Invariants:

- every holder of a block holds all of that block's cells, and the cells of two different block
  ids are never the same cells (copy_block makes a physical copy through the state API);
- within one llama sequence, the position spans of its blocks never overlap;
- a live sequence (one engine Sequence) holds exactly its cached prefix, in block-table order, so
  its next token lands at its highest position + 1 (llama_decode requires that).

Sharing a cached prefix is `seq_cp` (metadata only in a unified cache). A released sequence stays
behind as a holder of its blocks, so they remain cached until the engine reuses the block ids.
A block whose cells were dropped (no holders left) keeps its token ids and is re-decoded when
a sequence needs it again. No llama_cpp import here: `SeqMemory` is the seam (tests fake it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from ember.engine.errors import EngineError

if TYPE_CHECKING:
    from ember.engine.runners.base import SeqStep


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


@dataclass
class PlannedStep:
    """What to put in the llama batch for one SeqStep (re-decoded lost blocks come first)."""

    llama_seq: int
    token_ids: list[int]
    positions: list[int]
    num_logits: int
    num_recomputed: int = 0


class BlockMap:
    """Engine block id -> (llama seq ids, position span); plans batches and moves memory."""

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

    # ---- one forward step ------------------------------------------------------------------
    def plan(self, step: SeqStep) -> PlannedStep:
        """Make the step's llama sequence hold its cached prefix; record the new tokens."""
        holder = self.live_holder(step.seq_id)
        if len(step.token_ids) != len(step.positions) or not step.token_ids:
            raise EngineError(f"sequence {step.seq_id}: token_ids and positions must match")
        tokens, positions = self._sync_prefix(holder, step)
        planned = PlannedStep(holder.llama_seq, tokens, positions, step.num_logits, len(tokens))
        self.num_recomputed += len(tokens)
        self._record_new(holder, step)
        planned.token_ids += step.token_ids
        planned.positions += step.positions
        return planned

    def _sync_prefix(self, holder: Holder, step: SeqStep) -> tuple[list[int], list[int]]:
        bs = self.block_size
        want = step.block_table[: -(-step.num_cached // bs)]
        if len(want) * bs < step.num_cached:
            raise EngineError(f"sequence {step.seq_id}: block table shorter than its cache")
        if want and holder.blocks == want:  # fast path: a decode step of a running sequence
            loc = self.blocks[want[-1]]
            if len(loc.token_ids) == step.num_cached - (len(want) - 1) * bs:
                self._check_next(step, loc.pos_end)
                return [], []
        wanted = set(want)
        for block_id in [b for b in holder.blocks if b not in wanted]:
            self._let_go(holder, block_id)
        tokens: list[int] = []
        positions: list[int] = []
        for index, block_id in enumerate(want):
            count = min(bs, step.num_cached - index * bs)
            found = self.blocks.get(block_id)
            if found is None or len(found.token_ids) < count:
                have = 0 if found is None else len(found.token_ids)
                raise EngineError(
                    f"sequence {step.seq_id}: block {block_id} holds {have} tokens in llama.cpp "
                    f"memory, the engine expects {count}"
                )
            loc = found
            if len(loc.token_ids) > count:
                self._trim(block_id, count)
            if tokens or not loc.holders:
                # Lost cells (or after lost ones): decode again so positions stay consecutive.
                self._reset_keep_tokens(block_id)
                loc = self.blocks[block_id]
                loc.holders.add(holder.llama_seq)
                holder.blocks.append(block_id)
                tokens += loc.token_ids
                positions += range(loc.pos_start, loc.pos_end)
            elif holder.llama_seq not in loc.holders:
                src = next(iter(loc.holders))
                self.memory.seq_cp(src, holder.llama_seq, loc.pos_start, loc.pos_end)
                loc.holders.add(holder.llama_seq)
                holder.blocks.append(block_id)
        holder.blocks = list(want)
        if want:
            self._check_next(step, self.blocks[want[-1]].pos_end)
        return tokens, positions

    @staticmethod
    def _check_next(step: SeqStep, next_pos: int) -> None:
        if step.positions[0] != next_pos:
            raise EngineError(
                f"sequence {step.seq_id}: first new position {step.positions[0]} does not follow "
                f"the cached ones (next is {next_pos})"
            )

    def _reset_keep_tokens(self, block_id: int) -> None:
        loc = self.blocks[block_id]
        self._reset(block_id)
        self.blocks[block_id] = BlockLoc(loc.pos_start, loc.token_ids)

    def _record_new(self, holder: Holder, step: SeqStep) -> None:
        bs = self.block_size
        for j, (token, pos) in enumerate(zip(step.token_ids, step.positions, strict=True)):
            index = step.num_cached + j
            if index // bs >= len(step.block_table):
                raise EngineError(f"sequence {step.seq_id}: block table too short for its step")
            block_id = step.block_table[index // bs]
            if index % bs == 0:
                self._reset(block_id)
                self.blocks[block_id] = BlockLoc(pos, [], {holder.llama_seq})
                holder.blocks.append(block_id)
            elif j == 0:
                # Appending to the cached partial block: from now on only this sequence has it.
                loc = self.blocks[block_id]
                for seq in loc.holders - {holder.llama_seq}:
                    self._drop(self.holders[seq], block_id)
            loc = self.blocks[block_id]
            if pos != loc.pos_end:
                raise EngineError(
                    f"sequence {step.seq_id}: position {pos} breaks block {block_id}'s run "
                    f"(expected {loc.pos_end})"
                )
            loc.token_ids.append(token)

    # ---- engine-driven memory moves --------------------------------------------------------
    def shift(self, engine_seq: int, block_ids: list[int], delta: int) -> None:
        """Re-base the positions of block_ids by delta (sink eviction's K-shift)."""
        holder = self.live_holder(engine_seq)
        moving = [b for b in block_ids if b in self.blocks]
        spans = [(self.blocks[b].pos_start, self.blocks[b].pos_end) for b in moving]
        spans += [(p0 + delta, p1 + delta) for p0, p1 in spans]
        shifted = set(block_ids)
        for block_id in [b for b in holder.blocks if b not in shifted]:
            if any(self.blocks[block_id].overlaps(p0, p1) for p0, p1 in spans):
                self._let_go(holder, block_id)
        for block_id in sorted(moving, key=lambda b: self.blocks[b].pos_start, reverse=delta > 0):
            loc = self.blocks[block_id]
            if loc.holders and holder.llama_seq not in loc.holders:
                src = next(iter(loc.holders))
                self.memory.seq_cp(src, holder.llama_seq, loc.pos_start, loc.pos_end)
                loc.holders.add(holder.llama_seq)
                holder.blocks.append(block_id)
            for seq in loc.holders - {holder.llama_seq}:
                self._drop(self.holders[seq], block_id)  # shifted keys are no longer theirs
            if loc.holders:
                self.memory.seq_add(holder.llama_seq, loc.pos_start, loc.pos_end, delta)
            loc.pos_start += delta

    def copy(self, src_block: int, dst_block: int, num_tokens: int) -> None:
        """dst_block becomes a physical copy of src_block's first num_tokens cells."""
        src = self.blocks.get(src_block)
        if src is None or len(src.token_ids) < num_tokens:
            raise EngineError(f"copy_block: block {src_block} does not hold {num_tokens} tokens")
        span = (src.pos_start, src.pos_start + num_tokens)
        data = self._export([(src_block, num_tokens)]) if src.holders else b""
        self._reset(dst_block)
        self.blocks[dst_block] = BlockLoc(src.pos_start, src.token_ids[:num_tokens])
        keeper = self._keeper_for(*span) if data else None
        if keeper is not None:
            self._import(data, keeper, [dst_block])

    def release(self, engine_seq: int) -> None:
        """The sequence ended: its llama sequence keeps the blocks nobody else holds."""
        holder = self.live.pop(engine_seq, None)
        if holder is None:
            return
        holder.engine_seq = None
        for block_id in list(holder.blocks):
            loc = self.blocks[block_id]
            if len(loc.holders) > 1 or not loc.token_ids:
                self._drop(holder, block_id)
        self._retire_if_empty(holder)

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

    def export_groups(self, block_ids: list[int]) -> list[tuple[list[int], bytes]]:
        """Blocks in groups of non-overlapping positions, each with its state bytes."""
        groups: list[list[int]] = []
        for block_id in block_ids:
            loc = self.blocks.get(block_id)
            if loc is None:
                raise EngineError(f"read_blocks: block {block_id} is unknown to llama.cpp memory")
            for group in groups:
                if not any(self.blocks[b].overlaps(loc.pos_start, loc.pos_end) for b in group):
                    group.append(block_id)
                    break
            else:
                groups.append([block_id])
        return [
            (group, self._export([(b, len(self.blocks[b].token_ids)) for b in group]))
            for group in groups
        ]

    def import_group(self, blocks: list[tuple[int, int, list[int]]], data: bytes) -> None:
        """(block id, pos_start, token ids) of one group and its state bytes -> cached blocks."""
        for block_id, pos_start, token_ids in blocks:
            self._reset(block_id)
            self.blocks[block_id] = BlockLoc(pos_start, list(token_ids))
        p0 = min(p for _, p, _ in blocks)
        p1 = max(p + len(t) for _, p, t in blocks)
        keeper = self._keeper_for(p0, p1) or self._new_holder(None, evict=True)
        if keeper is None:
            return  # no slot at all: the blocks stay known by their tokens and are re-decoded
        self._import(data, keeper, [b for b, _, _ in blocks])
