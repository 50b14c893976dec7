"""Paged KV bookkeeping: fixed-size blocks, ref counts, hash-chained prefix blocks, LRU reuse.

Pure bookkeeping (no torch): it decides which physical block holds which cache slot; the runner
moves the bytes. A full block whose KV has been computed gets a chained hash
(blake2b(previous hash + its token ids)), so an identical prefix maps to the same physical block.
A freed hashed block stays findable until the allocator needs it (least recently freed first).
"""

from __future__ import annotations

import hashlib
import struct
from collections import OrderedDict
from collections.abc import Sequence as Seq
from dataclasses import dataclass

from ember.engine.errors import EngineError
from ember.engine.sequence import Sequence


def block_hash(prev_hash: bytes | None, token_ids: Seq[int]) -> bytes:
    """Chained hash of one full block: stable across processes (keys disk snapshots too)."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(prev_hash or b"\0" * 16)
    digest.update(struct.pack(f"<{len(token_ids)}q", *token_ids))
    return digest.digest()


def chain_hashes(token_ids: Seq[int], block_size: int) -> list[bytes]:
    """The chained hashes of every full block of token_ids."""
    hashes: list[bytes] = []
    prev: bytes | None = None
    for start in range(0, len(token_ids) - block_size + 1, block_size):
        prev = block_hash(prev, token_ids[start : start + block_size])
        hashes.append(prev)
    return hashes


@dataclass(frozen=True)
class CopyOp:
    """The runner must copy the first num_tokens slots of src_block into dst_block."""

    src_block: int
    dst_block: int
    num_tokens: int


@dataclass
class _Block:
    ref_count: int = 0
    hash: bytes | None = None  # set once the block is full, computed and registered


class BlockManager:
    """KV memory in num_blocks blocks of block_size tokens, shared by ref count."""

    def __init__(
        self,
        num_blocks: int,
        block_size: int = 16,
        *,
        enable_prefix_cache: bool = True,
        max_cached_blocks: int | None = None,
    ) -> None:
        if num_blocks < 1 or block_size < 1:
            raise EngineError(f"KV pool of {num_blocks} blocks x {block_size} tokens is empty")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.enable_prefix_cache = enable_prefix_cache
        # unreferenced hashed blocks kept findable; None = all free blocks may stay cached
        self.max_cached_blocks = num_blocks if max_cached_blocks is None else max_cached_blocks
        self._blocks = [_Block() for _ in range(num_blocks)]
        self._free_plain: list[int] = list(range(num_blocks - 1, -1, -1))  # stack, 0 on top
        self._free_cached: OrderedDict[int, None] = OrderedDict()  # LRU: oldest first
        self._by_hash: dict[bytes, int] = {}

    # ---- counters -------------------------------------------------------------------------
    @property
    def num_free_blocks(self) -> int:
        """Blocks the allocator can hand out (free cached blocks included)."""
        return len(self._free_plain) + len(self._free_cached)

    @property
    def num_cached_free_blocks(self) -> int:
        return len(self._free_cached)

    @property
    def num_used_blocks(self) -> int:
        return self.num_blocks - self.num_free_blocks

    def ref_count(self, block_id: int) -> int:
        return self._blocks[block_id].ref_count

    def blocks_for(self, num_tokens: int) -> int:
        """Blocks needed to hold num_tokens tokens."""
        return -(-num_tokens // self.block_size)

    # ---- prefix lookup --------------------------------------------------------------------
    def match_prefix(self, token_ids: Seq[int]) -> list[int]:
        """Physical blocks of the longest cached full-block prefix of token_ids (no side effects).

        At least one token is always left to compute, so a prompt that is entirely cached
        matches one block less (the model needs one forward to produce logits).
        """
        if not self.enable_prefix_cache:
            return []
        hits: list[int] = []
        for digest in chain_hashes(token_ids[: max(0, len(token_ids) - 1)], self.block_size):
            block_id = self._by_hash.get(digest)
            if block_id is None:
                break
            hits.append(block_id)
        return hits

    def lookup_hash(self, digest: bytes) -> int | None:
        return self._by_hash.get(digest) if self.enable_prefix_cache else None

    # ---- allocation -----------------------------------------------------------------------
    def can_allocate(self, seq: Sequence, num_tokens: int) -> bool:
        """Whether a waiting seq can get blocks for its first num_tokens (after prefix hits)."""
        hits = self.match_prefix(seq.token_ids)
        hit_tokens = len(hits) * self.block_size
        need = self.blocks_for(max(num_tokens, hit_tokens + 1)) - len(hits)
        free_hits = sum(1 for b in hits if self._blocks[b].ref_count == 0)
        return self.num_free_blocks - free_hits >= need

    def allocate(self, seq: Sequence, num_tokens: int) -> int:
        """Give a waiting seq its prefix hits plus blocks for num_tokens; return hit tokens."""
        if seq.block_table:
            raise EngineError(f"sequence {seq.seq_id} already holds blocks")
        if not self.can_allocate(seq, num_tokens):
            raise EngineError(f"sequence {seq.seq_id}: not enough free KV blocks")
        hits = self.match_prefix(seq.token_ids)
        for block_id in hits:
            self._take(block_id)
        seq.block_table = list(hits)
        seq.block_hashes = [self._blocks[b].hash for b in hits]  # type: ignore[misc]
        seq.num_processed = len(hits) * self.block_size
        self._grow(seq, max(num_tokens, seq.num_processed + 1))
        return seq.num_processed

    def allocate_blocks(self, count: int) -> list[int]:
        """Take count fresh blocks with ref count 1 (for disk snapshot restores)."""
        if self.num_free_blocks < count:
            raise EngineError(f"need {count} KV blocks, {self.num_free_blocks} free")
        return [self._pop_free() for _ in range(count)]

    def acquire(self, block_ids: Seq[int]) -> None:
        """Add a reference to each block (a free cached block leaves the free pool)."""
        for block_id in block_ids:
            self._take(block_id)

    def release_blocks(self, block_ids: Seq[int]) -> None:
        """Drop one reference from each block (the inverse of acquire / allocate_blocks)."""
        for block_id in block_ids:
            self._release(block_id)

    def can_append(self, seq: Sequence, num_new_tokens: int) -> bool:
        """Whether seq's table can grow to hold num_new_tokens more cache tokens."""
        need = self.blocks_for(seq.num_kv_tokens + num_new_tokens) - len(seq.block_table)
        if self._last_block_shared(seq):
            need += 1
        return self.num_free_blocks >= need

    def append(self, seq: Sequence, num_new_tokens: int) -> list[CopyOp]:
        """Grow seq's table to hold num_new_tokens more; copy-on-write a shared partial block."""
        ops: list[CopyOp] = []
        if not self.can_append(seq, num_new_tokens):
            raise EngineError(f"sequence {seq.seq_id}: not enough free KV blocks")
        if self._last_block_shared(seq):
            ops.append(self._copy_on_write(seq, len(seq.block_table) - 1))
        self._grow(seq, seq.num_kv_tokens + num_new_tokens)
        return ops

    def fork(self, parent: Sequence, child: Sequence) -> None:
        """Let child share every block of parent (its partial last block is copied on write)."""
        for block_id in parent.block_table:
            self._blocks[block_id].ref_count += 1
        child.block_table = list(parent.block_table)
        child.block_hashes = list(parent.block_hashes)
        child.token_ids = list(parent.token_ids)
        child.num_processed = parent.num_processed
        child.num_evicted = parent.num_evicted
        child.num_sink_kept = parent.num_sink_kept

    # ---- release --------------------------------------------------------------------------
    def free(self, seq: Sequence) -> None:
        """Drop seq's references; hashed blocks stay findable until reused."""
        for block_id in reversed(seq.block_table):
            self._release(block_id)
        seq.block_table = []
        seq.block_hashes = []

    def drop_blocks(self, seq: Sequence, start: int, count: int) -> list[int]:
        """Remove count blocks from seq's table at index start (sink eviction); return them."""
        dropped = seq.block_table[start : start + count]
        del seq.block_table[start : start + count]
        for block_id in dropped:
            self._release(block_id)
        del seq.block_hashes[min(start, len(seq.block_hashes)) :]
        return dropped

    def truncate(self, seq: Sequence, num_kv_tokens: int) -> None:
        """Shrink seq's cache to num_kv_tokens (rolls back rejected draft tokens)."""
        keep = self.blocks_for(num_kv_tokens)
        for block_id in seq.block_table[keep:]:
            self._release(block_id)
        del seq.block_table[keep:]
        del seq.block_hashes[num_kv_tokens // self.block_size :]
        seq.num_processed = num_kv_tokens + seq.num_evicted
        if num_kv_tokens % self.block_size and self._blocks[seq.block_table[-1]].ref_count == 1:
            self._unhash(seq.block_table[-1])  # it will be written again: no longer that content

    def make_private(self, seq: Sequence, index: int) -> CopyOp | None:
        """Before its keys are rewritten (position shift): own block index alone, unhashed."""
        block_id = seq.block_table[index]
        if self._blocks[block_id].ref_count > 1:
            return self._copy_on_write(seq, index)
        self._unhash(block_id)
        return None

    # ---- hashing --------------------------------------------------------------------------
    def register_full_blocks(self, seq: Sequence) -> None:
        """Hash seq's newly computed full blocks (only those before any evicted range)."""
        if not self.enable_prefix_cache:
            return
        limit = seq.num_kv_tokens // self.block_size
        if seq.num_evicted:
            limit = min(limit, seq.num_sink_kept // self.block_size)
        while len(seq.block_hashes) < limit:
            index = len(seq.block_hashes)
            prev = seq.block_hashes[-1] if seq.block_hashes else None
            tokens = seq.token_ids[index * self.block_size : (index + 1) * self.block_size]
            digest = block_hash(prev, tokens)
            seq.block_hashes.append(digest)
            block_id = seq.block_table[index]
            block = self._blocks[block_id]
            if block.hash is None and digest not in self._by_hash:
                block.hash = digest
                self._by_hash[digest] = block_id

    def register_restored(self, block_id: int, digest: bytes) -> None:
        """Make a block filled from a disk snapshot findable by its hash."""
        if self.enable_prefix_cache and digest not in self._by_hash:
            self._unhash(block_id)
            self._blocks[block_id].hash = digest
            self._by_hash[digest] = block_id

    # ---- internals ------------------------------------------------------------------------
    def _last_block_shared(self, seq: Sequence) -> bool:
        partial = seq.num_kv_tokens % self.block_size
        return bool(partial and seq.block_table) and (
            self._blocks[seq.block_table[-1]].ref_count > 1
        )

    def _copy_on_write(self, seq: Sequence, index: int) -> CopyOp:
        src = seq.block_table[index]
        dst = self._pop_free()
        self._release(src)
        seq.block_table[index] = dst
        num_tokens = min(self.block_size, seq.num_kv_tokens - index * self.block_size)
        return CopyOp(src, dst, num_tokens)

    def _grow(self, seq: Sequence, num_kv_tokens: int) -> None:
        while len(seq.block_table) < self.blocks_for(num_kv_tokens):
            seq.block_table.append(self._pop_free())

    def _take(self, block_id: int) -> None:
        block = self._blocks[block_id]
        if block.ref_count == 0:
            del self._free_cached[block_id]
        block.ref_count += 1

    def _pop_free(self) -> int:
        if self._free_plain:
            block_id = self._free_plain.pop()
        elif self._free_cached:
            block_id, _ = self._free_cached.popitem(last=False)
            self._unhash(block_id)
        else:
            raise EngineError("KV pool exhausted")
        self._blocks[block_id].ref_count = 1
        return block_id

    def _release(self, block_id: int) -> None:
        block = self._blocks[block_id]
        if block.ref_count <= 0:
            raise EngineError(f"block {block_id} freed twice")
        block.ref_count -= 1
        if block.ref_count:
            return
        if block.hash is None:
            self._free_plain.append(block_id)
            return
        self._free_cached[block_id] = None
        while len(self._free_cached) > self.max_cached_blocks:
            oldest, _ = self._free_cached.popitem(last=False)
            self._unhash(oldest)
            self._free_plain.insert(0, oldest)

    def _unhash(self, block_id: int) -> None:
        block = self._blocks[block_id]
        if block.hash is not None:
            if self._by_hash.get(block.hash) == block_id:
                del self._by_hash[block.hash]
            block.hash = None

    def check_invariants(self) -> None:
        """Raise AssertionError if the bookkeeping is inconsistent (tests)."""
        free = set(self._free_plain) | set(self._free_cached)
        assert len(free) == len(self._free_plain) + len(self._free_cached), "free listed twice"
        for block_id, block in enumerate(self._blocks):
            assert block.ref_count >= 0
            assert (block.ref_count == 0) == (block_id in free), f"block {block_id} free/used"
            if block_id in self._free_cached:
                assert block.hash is not None
        for digest, block_id in self._by_hash.items():
            assert self._blocks[block_id].hash == digest
