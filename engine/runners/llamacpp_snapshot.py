"""The byte format of read_blocks/write_blocks for the llama.cpp runner.

The engine's prefix_store wraps these bytes (model digest, runner, dtype, block hashes, checksum),
so this only has to describe the blocks. Layout, little-endian:

    magic b"EMBLLCPP", u32 version, u32 num_groups
    per group: u32 num_blocks,
               per block: u32 index (into block_ids), i32 pos_start, u32 num_tokens, i32 tokens[num_tokens]
               u64 num_state_bytes, state bytes (llama_state_seq_get_data of the group)

A group is a set of blocks with non-overlapping positions (one llama sequence's worth).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ember.engine.errors import EngineError

MAGIC = b"EMBLLCPP"
VERSION = 1


@dataclass(frozen=True)
class SnapshotBlock:
    """One block of a snapshot group."""

    index: int  # position in the block_ids list given to read_blocks/write_blocks
    pos_start: int
    token_ids: tuple[int, ...]


@dataclass(frozen=True)
class SnapshotGroup:
    """Blocks stored in one llama sequence state."""

    blocks: tuple[SnapshotBlock, ...]
    state: bytes


def pack(groups: list[SnapshotGroup]) -> bytes:
    """Serialize groups."""
    out = [MAGIC, struct.pack("<II", VERSION, len(groups))]
    for group in groups:
        out.append(struct.pack("<I", len(group.blocks)))
        for block in group.blocks:
            out.append(struct.pack("<IiI", block.index, block.pos_start, len(block.token_ids)))
            out.append(struct.pack(f"<{len(block.token_ids)}i", *block.token_ids))
        out.append(struct.pack("<Q", len(group.state)))
        out.append(group.state)
    return b"".join(out)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.offset = 0

    def take(self, fmt: str) -> tuple[int, ...]:
        size = struct.calcsize(fmt)
        if self.offset + size > len(self.data):
            raise EngineError("llama.cpp snapshot is truncated")
        values = struct.unpack_from(fmt, self.data, self.offset)
        self.offset += size
        return values

    def raw(self, size: int) -> bytes:
        if self.offset + size > len(self.data):
            raise EngineError("llama.cpp snapshot is truncated")
        chunk = bytes(self.data[self.offset : self.offset + size])
        self.offset += size
        return chunk


def unpack(data: bytes, num_blocks: int, block_size: int) -> list[SnapshotGroup]:
    """Parse and validate bytes from pack() for num_blocks blocks; EngineError when malformed."""
    reader = _Reader(data)
    if reader.raw(len(MAGIC)) != MAGIC:
        raise EngineError("not a llama.cpp runner snapshot (bad magic)")
    version, num_groups = reader.take("<II")
    if version != VERSION:
        raise EngineError(f"llama.cpp snapshot version {version} is not {VERSION}")
    groups: list[SnapshotGroup] = []
    seen: set[int] = set()
    for _ in range(num_groups):
        (count,) = reader.take("<I")
        blocks = []
        for _ in range(count):
            index, pos_start, num_tokens = reader.take("<IiI")
            if index >= num_blocks or index in seen or not 0 < num_tokens <= block_size:
                raise EngineError(f"llama.cpp snapshot: bad block entry {index}/{num_tokens}")
            seen.add(index)
            tokens = reader.take(f"<{num_tokens}i")
            blocks.append(SnapshotBlock(index, pos_start, tokens))
        (state_size,) = reader.take("<Q")
        groups.append(SnapshotGroup(tuple(blocks), reader.raw(state_size)))
    if len(seen) != num_blocks or reader.offset != len(reader.data):
        raise EngineError(f"llama.cpp snapshot holds {len(seen)} blocks, expected {num_blocks}")
    return groups
