"""Resident memory follows the experts in use: a MoE GGUF loaded through the real loader from a
cold page cache, one token run, and then only the chosen experts' pages are in memory (mincore
on the file's pages) and the process maps far less of the file than its size (smaps). Their
pages came in as whole reads asked for ahead (MADV_WILLNEED), not one major fault per page."""

from __future__ import annotations

import ctypes
import mmap
import os
import resource
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pytest

from ember.engine.runners.torch.runner import TorchOptions, TorchRunner
from tests.fixtures.quick_gguf import write_tiny_gguf

from .helpers import prefill_logits

if TYPE_CHECKING:
    from ember.engine.runners.torch.model import DecoderLayer

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="mincore and smaps residency checks are Linux's"
)
PAGE = mmap.PAGESIZE
N_EXPERTS, USED, WIDTH = 8, 2, 2048  # each expert ~280 KiB: 70 pages over its three matrices
STACKS = ("ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight")


def _cold_moe_file(tmp_path: Path) -> Path:
    """A fresh qwen3moe GGUF dropped from the page cache (skips where the cache keeps it)."""
    return _drop(
        write_tiny_gguf(tmp_path / "moe.gguf", "qwen3moe", experts=(N_EXPERTS, USED, WIDTH))
    )


def _drop(path: Path) -> Path:
    """path, written out and dropped from the page cache (skips where the cache keeps it)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as buf:
            cached = _resident(np.frombuffer(buf, dtype=np.uint8)).sum()
    finally:
        os.close(fd)
    if cached:
        pytest.skip(f"{path.parent}: this file system keeps the file in memory ({cached} pages)")
    return path


def _resident(view: np.ndarray) -> np.ndarray:
    """mincore(2): 1 per page of the view's span that is in memory."""
    libc = ctypes.CDLL(None, use_errno=True)
    start = view.ctypes.data // PAGE * PAGE
    length = view.ctypes.data + view.nbytes - start
    vec = (ctypes.c_ubyte * (-(-length // PAGE)))()
    rc = libc.mincore(ctypes.c_void_p(start), ctypes.c_size_t(length), vec)
    assert rc == 0, ctypes.get_errno()
    out = np.ctypeslib.as_array(vec) & 1
    del vec  # mincore's vector, not the view
    return out


def _interior_resident(stack: np.ndarray, expert: int) -> tuple[int, int]:
    """(resident, total) pages lying wholly inside expert `expert`'s bytes of a stack."""
    per = stack.nbytes // N_EXPERTS
    part = stack[expert * per : (expert + 1) * per]
    lo, hi = part.ctypes.data, part.ctypes.data + part.nbytes
    first, last = -(-lo // PAGE), hi // PAGE  # pages [first, last) are inside
    pages = _resident(part)
    offset = first - lo // PAGE
    inside = pages[offset : offset + max(0, last - first)]
    return int(inside.sum()), len(inside)


def _file_rss_bytes(path: Path) -> int:
    """Rss of this process's mappings of path (/proc/self/smaps)."""
    total, ours = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split(maxsplit=1)[0]
        if "-" in head and not head.endswith(":"):
            ours = line.rstrip().endswith(str(path))
        elif ours and line.startswith("Rss:"):
            total += int(line.split()[1]) * 1024
    return total


def _chosen(moe: Any) -> list[bool]:
    if moe.native is not None:
        return [bool(n) for n in moe.native.chosen]
    return [e is not None for e in moe.experts]


@pytest.mark.parametrize("kernels", ["auto", "torch"])
def test_only_the_chosen_experts_are_in_memory(tmp_path: Path, kernels: str) -> None:
    path = _cold_moe_file(tmp_path)
    runner = TorchRunner.load(path, TorchOptions(device="cpu", threads=1, kernels=kernels))
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_majflt
    prefill_logits(runner, [17])  # one token: 2 of 8 experts in each layer
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_majflt - faults
    chosen_pages = 0
    for i, layer in enumerate(runner.model.layers):
        moe = cast("DecoderLayer", layer).w.moe
        assert moe is not None
        chosen = _chosen(moe)
        assert sum(chosen) == USED
        for name in STACKS:
            stack = runner.src.tensors[f"blk.{i}.{name}"].raw
            for e in range(N_EXPERTS):
                resident, pages = _interior_resident(stack, e)
                assert pages > 0
                if chosen[e]:
                    assert resident == pages, (i, name, e, resident, pages)
                    chosen_pages += pages
                else:
                    assert resident == 0, (i, name, e, resident, pages)
    size = path.stat().st_size
    assert _file_rss_bytes(path) < size / 2, (_file_rss_bytes(path), size)
    # measured 0-1; without the read-ahead requests one per page (272 of 268 chosen pages)
    assert faults < chosen_pages / 10, (faults, chosen_pages)


MADV_PAGEOUT = 21  # Linux 5.4+: reclaim these pages now


def test_an_expert_evicted_while_idle_is_read_whole_again(tmp_path: Path) -> None:
    """A model larger than memory: the kernel reclaims an idle expert's pages. When a token
    chooses it again after IDLE_TOKENS (csrc/moe.c) its rows are asked for in one go, not
    faulted back in page by page (the mapping is MADV_RANDOM: no read-around)."""
    import torch
    from gguf import GGMLQuantizationType as Q

    from ember.engine.runners.torch.native.kernels import native_build
    from ember.engine.runners.torch.native.moe import NativeMoE
    from ember.engine.runners.torch.residency import MADV_RANDOM, advise
    from tests.conftest import TEST_CACHE
    from tests.models.quants.quant_blocks import random_tensor

    build = native_build(TEST_CACHE / "native")
    if build.lib is None:
        pytest.skip(build.reason)
    hidden, width = 256, 512  # Q8_0: each expert matrix 34 pages
    shapes = {"gate": (8, width, hidden), "up": (8, width, hidden), "down": (8, hidden, width)}
    raws = {
        n: random_tensor(Q.Q8_0, s[0] * s[1], s[2], seed=i)
        for i, (n, s) in enumerate(shapes.items())
    }
    path = tmp_path / "experts.bin"
    path.write_bytes(b"".join(r.tobytes() for r in raws.values()))
    path = _drop(path)
    with path.open("rb") as f:
        buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    data = np.frombuffer(buf, dtype=np.uint8)
    advise([data], MADV_RANDOM)
    views, at = {}, 0
    for name, raw in raws.items():
        views[name] = (data[at : at + raw.nbytes], int(Q.Q8_0), shapes[name])
        at += raw.nbytes
    router = torch.eye(8, hidden) * 10  # a token big on coordinates i and j chooses i and j
    moe = NativeMoE(build.lib, router, None, views, 2, True, False)
    a, b = torch.zeros(1, hidden), torch.zeros(64, hidden)
    a[0, :2], b[:, 2:4] = 1.0, 1.0
    moe.forward(a)
    assert moe.chosen.tolist() == [1, 1, 0, 0, 0, 0, 0, 0]
    libc = ctypes.CDLL(None, use_errno=True)
    spans = [view[: 2 * view.nbytes // 8] for view, _, _ in views.values()]  # experts 0 and 1
    for span in spans:
        start = span.ctypes.data // PAGE * PAGE
        if libc.madvise(ctypes.c_void_p(start), ctypes.c_size_t(span.nbytes), MADV_PAGEOUT):
            pytest.skip(f"MADV_PAGEOUT refused (errno {ctypes.get_errno()})")
    if any(_resident(span)[1:-1].any() for span in spans):
        pytest.skip("MADV_PAGEOUT left the pages in memory")
    moe.forward(b)  # 64 tokens choosing experts 2 and 3: experts 0 and 1 idle
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_majflt
    moe.forward(a)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_majflt - faults
    pages = sum(len(_resident(span)) for span in spans)
    assert all(_resident(span)[1:-1].all() for span in spans)
    # measured 0-1; faulted back page by page: one per page
    assert faults < pages / 10, (faults, pages)
