"""BlockMap: the engine's KV block decisions mapped onto llama.cpp sequence memory.

A block is the cells of a llama sequence (a holder) over a position span; see
holders.py for the bookkeeping. Invariants:

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

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ember.engine.errors import EngineError
from ember.engine.runners.llamacpp.holders import BlockLoc, Holder, HolderPool, SeqMemory

if TYPE_CHECKING:
    from ember.engine.runners.base import SeqStep

__all__ = ["BlockLoc", "BlockMap", "Holder", "PlannedStep", "SeqMemory"]


@dataclass
class PlannedStep:
    """What to put in the llama batch for one SeqStep (re-decoded lost blocks come first)."""

    llama_seq: int
    token_ids: list[int]
    positions: list[int]
    num_logits: int
    num_recomputed: int = 0


class BlockMap(HolderPool):
    """Plans each step's llama batch and applies the engine's copies, shifts and snapshots."""

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

    def export_block(self, block_id: int) -> tuple[BlockLoc, bytes]:
        """A block's location and tokens, and its cells as state bytes (for disk snapshots)."""
        loc = self.blocks.get(block_id)
        if loc is None or not loc.holders:
            raise EngineError(f"read_blocks: block {block_id} is not in llama.cpp memory")
        return loc, self._export([(block_id, len(loc.token_ids))])

    def import_block(
        self, block_id: int, pos_start: int, token_ids: list[int], state: bytes
    ) -> None:
        """Make block_id hold state bytes from export_block (a keeper sequence holds them)."""
        self._reset(block_id)
        self.blocks[block_id] = BlockLoc(pos_start, list(token_ids))
        keeper = self._keeper_for(pos_start, pos_start + len(token_ids))
        keeper = keeper or self._new_holder(None, evict=True)
        if keeper is not None:  # else the block stays known by its tokens and is re-decoded
            self._import(state, keeper, [block_id])
