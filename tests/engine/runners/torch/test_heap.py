"""release_free_heap hands freed heap memory back to the OS (glibc), through the real libc."""

from __future__ import annotations

import ctypes
import sys
from pathlib import Path

import pytest

from ember.engine.runners.torch import heap

BLOCK = 100 * 1024  # under glibc's default mmap threshold: these come from the heap itself
BLOCKS = 400  # 40 MiB


def _rss_anon_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no RssAnon in /proc/self/status")


@pytest.mark.skipif(heap._malloc_trim() is None, reason="the C library has no malloc_trim")
def test_freed_heap_blocks_leave_the_resident_set() -> None:
    libc = ctypes.CDLL(None)
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    blocks = [libc.malloc(BLOCK) for _ in range(BLOCKS)]
    assert all(blocks)
    for b in blocks:
        ctypes.memset(b, 1, BLOCK)  # resident now
    pin = libc.malloc(BLOCK)  # keeps the heap's top in use, so free() alone trims nothing
    for b in blocks:
        libc.free(b)
    before = _rss_anon_mib()
    assert heap.release_free_heap() is True
    after = _rss_anon_mib()
    libc.free(pin)
    assert before - after > 0.5 * BLOCK * BLOCKS / 2**20, (before, after)


def test_without_malloc_trim_it_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    heap._malloc_trim.cache_clear()
    try:
        assert heap._malloc_trim() is None
        assert heap.release_free_heap() is False
    finally:
        monkeypatch.undo()
        heap._malloc_trim.cache_clear()
