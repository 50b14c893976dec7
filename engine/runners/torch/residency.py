"""What the kernel reads ahead of a MoE model's mmap, so that resident memory follows the
experts in use rather than the file size.

A page fault in a plain file mapping reads the device's read-ahead window around it (8 MiB on
common virtual disks; /sys/block/*/queue/read_ahead_kb), so touching a 1 KiB norm pulls in the
megabytes of experts stored beside it, and fault-around then maps cached neighbours into the
process. For a MoE GGUF the loader therefore marks the mapping MADV_RANDOM (a fault reads only
its page) before any tensor is touched, and asks for the dense tensors (attention, norms,
routers, the LM head) with MADV_WILLNEED: one asynchronous read of exactly their bytes. The
token embedding stays random (only looked-up rows are read), and each expert is asked for with
MADV_WILLNEED by the native kernels the first time a token chooses it (csrc/moe.c), so its
first use is one read of its own rows, not thousands of single-page faults.

Advice is a hint: where madvise is missing (not POSIX) or refuses, nothing changes but memory.
"""

from __future__ import annotations

import ctypes
import logging
import mmap
import sys
from collections.abc import Iterable
from functools import cache
from typing import Any

log = logging.getLogger(__name__)

MADV_RANDOM, MADV_WILLNEED = 1, 3  # Linux and the BSDs/macOS agree on these two values
# Linux reads at most one read-ahead window per MADV_WILLNEED call (max(read_ahead_kb, the
# device's largest request): 128 KiB by default), so longer ranges are asked for in chunks
WILLNEED_CHUNK = 128 << 10


@cache
def _madvise() -> Any:
    if sys.platform == "win32":
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.madvise
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


def page_span(address: int, nbytes: int) -> tuple[int, int]:
    """The page-aligned [start, end) covering address .. address + nbytes."""
    page = mmap.PAGESIZE
    return address // page * page, -(-(address + nbytes) // page) * page


def advise(views: Iterable[Any], advice: int) -> bool:
    """madvise(advice) over the pages of each numpy view of a file mapping; False if refused."""
    fn = _madvise()
    if fn is None:
        return False
    ok = True
    for view in views:
        if view is None or not view.nbytes:
            continue
        start, end = page_span(view.ctypes.data, view.nbytes)
        step = WILLNEED_CHUNK if advice == MADV_WILLNEED else end - start
        for at in range(start, end, step):
            if fn(at, min(step, end - at), advice) != 0:
                ok = False
    return ok


def advise_moe(tensors: dict[str, Any], path: object) -> None:
    """Random access for the whole file's tensors, read-ahead for the dense ones only
    (tensors: name -> numpy view; expert stacks are named *_exps.*)."""
    views = list(tensors.values())
    dense = [
        v for name, v in tensors.items() if "_exps." not in name and name != "token_embd.weight"
    ]
    if not (advise(views, MADV_RANDOM) and advise(dense, MADV_WILLNEED)):
        log.info("%s: madvise refused; experts may be read ahead of use", path)
