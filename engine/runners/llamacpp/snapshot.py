"""The byte format of read_blocks/write_blocks for the llama.cpp runner: block-major records.

The engine's prefix_store wraps these bytes (model digest, runner, dtype, block hashes, checksum)
and slices them per block (a snapshot of n blocks can restore its first k), so every block is
one record and all records of one call have the same size. Record layout, little-endian:

    magic b"EMLB", u16 version, u16 block_size, i32 pos_start, u32 num_tokens, u64 num_state_bytes
    i32 tokens[block_size] (the first num_tokens used), state bytes, zero padding

The state is `llama_state_seq_get_data` of a sequence holding just that block's cells.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ember.engine.errors import EngineError

MAGIC = b"EMLB"
VERSION = 1
_HEADER = struct.Struct("<4sHHiIQ")


@dataclass(frozen=True)
class BlockRecord:
    """One block: where it sits, what it holds, and its KV cells as llama.cpp state bytes."""

    pos_start: int
    token_ids: tuple[int, ...]
    state: bytes


def _record(block: BlockRecord, block_size: int) -> bytes:
    if len(block.token_ids) > block_size:
        raise EngineError(f"block of {len(block.token_ids)} tokens exceeds block_size {block_size}")
    padded = list(block.token_ids) + [0] * (block_size - len(block.token_ids))
    header = _HEADER.pack(
        MAGIC, VERSION, block_size, block.pos_start, len(block.token_ids), len(block.state)
    )
    return header + struct.pack(f"<{block_size}i", *padded) + block.state


def pack(blocks: list[BlockRecord], block_size: int) -> bytes:
    """Records of equal size (zero-padded to the longest), concatenated in order."""
    records = [_record(block, block_size) for block in blocks]
    size = max((len(r) for r in records), default=0)
    return b"".join(r.ljust(size, b"\0") for r in records)


def unpack(data: bytes, num_blocks: int, block_size: int) -> list[BlockRecord]:
    """Split and validate bytes from pack(); EngineError naming the problem when malformed."""
    if num_blocks <= 0 or not data or len(data) % num_blocks:
        raise EngineError(f"llama.cpp snapshot of {len(data)} bytes is not {num_blocks} records")
    size = len(data) // num_blocks
    tokens_size = 4 * block_size
    out = []
    for index in range(num_blocks):
        record = data[index * size : (index + 1) * size]
        if len(record) < _HEADER.size + tokens_size:
            raise EngineError("llama.cpp snapshot record is truncated")
        magic, version, bs, pos_start, count, state_len = _HEADER.unpack_from(record)
        if magic != MAGIC or version != VERSION or bs != block_size:
            raise EngineError(f"not a llama.cpp runner snapshot (v{version}, block size {bs})")
        start = _HEADER.size + tokens_size
        if not 0 < count <= block_size or start + state_len > len(record):
            raise EngineError(f"llama.cpp snapshot record {index} is malformed")
        tokens = struct.unpack_from(f"<{count}i", record, _HEADER.size)
        out.append(BlockRecord(pos_start, tokens, bytes(record[start : start + state_len])))
    return out
