"""The llama.cpp runner's block-major snapshot records."""

from __future__ import annotations

import pytest

from ember.engine.errors import EngineError
from ember.engine.runners.llamacpp.snapshot import BlockRecord, pack, unpack


def test_records_round_trip_with_equal_sizes() -> None:
    blocks = [BlockRecord(0, (1, 2, 3, 4), b"abc"), BlockRecord(4, (5, 6), b"defgh")]
    data = pack(blocks, block_size=4)
    assert len(data) % 2 == 0
    assert unpack(data, 2, 4) == blocks
    half = len(data) // 2
    assert unpack(data[half:], 1, 4) == blocks[1:]  # the prefix store slices per block


@pytest.mark.parametrize(
    ("mutate", "count", "size"),
    [
        (lambda d: d[:-3], 2, 4),  # not a multiple of the record count
        (lambda d: b"XXXX" + d[4:], 2, 4),  # bad magic
        (lambda d: d, 2, 8),  # other block size
        (lambda d: d, 0, 4),
    ],
)
def test_malformed_snapshots_are_refused(mutate: object, count: int, size: int) -> None:
    data = pack([BlockRecord(0, (1, 2), b"s1"), BlockRecord(2, (3, 4), b"s2")], block_size=4)
    with pytest.raises(EngineError):
        unpack(mutate(data), count, size)  # type: ignore[operator]
