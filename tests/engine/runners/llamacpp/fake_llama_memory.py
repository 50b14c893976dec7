"""A model of llama.cpp's unified KV cache for testing BlockMap without a model.

Cells carry a position, a set of sequence ids and what was computed there (the token id). It
mirrors the rules the real cache enforces: seq_cp shares cells (no copy), seq_add moves a cell's
one position for every sequence holding it, state_set makes new cells, and a decode must start at
the sequence's highest position + 1.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from ember.engine.errors import EngineError


@dataclass
class Cell:
    pos: int
    token: int
    seqs: set[int] = field(default_factory=set)


class FakeLlamaMemory:
    """SeqMemory over a list of cells, plus decode() for the tokens a planned step adds."""

    def __init__(self, num_cells: int = 10_000) -> None:
        self.cells: list[Cell] = []
        self.num_cells = num_cells
        self.ops: list[str] = []

    def _gc(self) -> None:
        self.cells = [c for c in self.cells if c.seqs]

    def _in(self, cell: Cell, seq: int, p0: int, p1: int) -> bool:
        p0 = 0 if p0 < 0 else p0
        p1 = 2**31 if p1 < 0 else p1
        return seq in cell.seqs and p0 <= cell.pos < p1

    def seq_rm(self, seq: int, p0: int, p1: int) -> None:
        self.ops.append("rm")
        for cell in self.cells:
            if (seq < 0 or seq in cell.seqs) and (p0 < 0 or cell.pos >= p0):
                if p1 < 0 or cell.pos < p1:
                    if seq < 0:
                        cell.seqs.clear()
                    else:
                        cell.seqs.discard(seq)
        self._gc()

    def seq_cp(self, src: int, dst: int, p0: int, p1: int) -> None:
        self.ops.append("cp")
        for cell in self.cells:
            if self._in(cell, src, p0, p1):
                cell.seqs.add(dst)

    def seq_add(self, seq: int, p0: int, p1: int, delta: int) -> None:
        self.ops.append("add")
        for cell in self.cells:
            if self._in(cell, seq, p0, p1):
                cell.pos += delta

    def state_get(self, seq: int) -> bytes:
        """Fixed-size binary like llama.cpp's: (pos, token) int32 pairs per cell."""
        self.ops.append("get")
        cells = [(c.pos, c.token) for c in self.cells if seq in c.seqs]
        return struct.pack(f"<{2 * len(cells)}i", *(v for cell in cells for v in cell))

    def state_set(self, seq: int, data: bytes) -> None:
        self.ops.append("set")
        self.seq_rm(seq, -1, -1)
        if len(data) % 8:
            raise EngineError("bad state")
        values = struct.unpack(f"<{len(data) // 4}i", data)
        self.cells += [Cell(p, t, {seq}) for p, t in zip(values[::2], values[1::2], strict=True)]

    def decode(self, seq: int, tokens: list[int], positions: list[int]) -> None:
        """What llama_decode does to memory, with its consecutive-position check."""
        top = max((c.pos for c in self.cells if seq in c.seqs), default=-1)
        if top >= 0 and positions[0] != top + 1:
            raise AssertionError(f"seq {seq}: decode at {positions[0]} after {top}")
        self.cells += [Cell(p, t, {seq}) for t, p in zip(tokens, positions, strict=True)]
        if len(self.cells) > self.num_cells:
            raise AssertionError("out of cells")

    def view(self, seq: int) -> list[tuple[int, int]]:
        """(position, token) of the cells seq holds, in position order."""
        return sorted((c.pos, c.token) for c in self.cells if seq in c.seqs)
