"""Hand the C heap's free memory back to the OS before a long CPU prefill reaches the LM head.

A prefill of hundreds of tokens allocates tens of MiB of short-lived float32 buffers
(activations, dequantized weights). glibc keeps freed blocks in its heap (its mmap threshold
grows to the largest block freed), so they stay resident; the LM head then pages its whole
weight in (170 MiB on the starter model) on top of them, and the process's peak RSS is the two
together. malloc_trim(0) returns the free blocks first. Where the C library has no malloc_trim
(musl, macOS), nothing happens.
"""

from __future__ import annotations

import ctypes
import functools
import sys
from typing import Any


@functools.cache
def _malloc_trim() -> Any:
    """glibc's malloc_trim, or None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    fn.argtypes, fn.restype = [ctypes.c_size_t], ctypes.c_int
    return fn


def release_free_heap() -> bool:
    """Return the heap's free pages to the OS; False where the C library cannot."""
    fn = _malloc_trim()
    if fn is None:
        return False
    fn(0)
    return True
