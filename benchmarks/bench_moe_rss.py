"""Resident memory of a MoE GGUF on the torch runner against the experts in use.

Usage: python benchmarks/bench_moe_rss.py MOE.gguf [--prompt-tokens P] [--decode N] [--threads T]
       [--warm]

The file is dropped from the page cache first (posix_fadvise DONTNEED; a file another process
maps or holds dirty stays cached: the table says how much was left), or with --warm read whole
into it (as a download, a digest or another program leaves it: the kernel may then map cached
neighbours of a touched page, large folios included), then loaded through the
runner, prefilled with P tokens and decoded greedily for N. After each stage: the experts
chosen so far (of all layers'), this process's resident pages of the file (RssFile of its
mappings, /proc/self/smaps) and the file's pages in the page cache (mincore). Linux only.
"""

from __future__ import annotations

import argparse
import ctypes
import mmap
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

MIB = 1 << 20


def drop_from_page_cache(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def page_cache_bytes(path: Path) -> int:
    """Bytes of the file in the page cache (mincore over a fresh mapping)."""
    import numpy as np

    libc = ctypes.CDLL(None, use_errno=True)
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        view = np.frombuffer(buf, dtype=np.uint8)
        pages = -(-view.nbytes // mmap.PAGESIZE)
        vec = (ctypes.c_ubyte * pages)()
        libc.mincore(ctypes.c_void_p(view.ctypes.data), ctypes.c_size_t(view.nbytes), vec)
        del view
        return int(sum(v & 1 for v in vec)) * mmap.PAGESIZE


def rss_file_bytes(path: Path) -> int:
    """Rss of this process's mappings of path."""
    total, ours = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split(maxsplit=1)[0]
        if "-" in head and not head.endswith(":"):
            ours = line.rstrip().endswith(str(path))
        elif ours and line.startswith("Rss:"):
            total += int(line.split()[1]) * 1024
    return total


def experts_chosen(runner: Any) -> tuple[int, int]:
    moes = [layer.w.moe for layer in runner.model.layers if layer.w.moe is not None]
    return sum(m.n_built for m in moes), sum(m.n_experts for m in moes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("gguf", type=Path)
    parser.add_argument("--prompt-tokens", type=int, default=8)
    parser.add_argument("--decode", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--warm", action="store_true", help="read the file into the cache first")
    args = parser.parse_args()
    if args.prompt_tokens < 1 or args.decode < 0 or args.threads < 1:
        parser.error("--prompt-tokens and --threads must be >= 1, --decode >= 0")
    from ember.engine.runners.base import ForwardBatch, SeqStep
    from ember.engine.runners.torch.runner import TorchOptions, TorchRunner

    path = args.gguf.resolve()
    size = path.stat().st_size
    if args.warm:
        with path.open("rb") as f:
            while f.read(16 * MIB):
                pass
    else:
        drop_from_page_cache(path)
    first = "read into the page cache" if args.warm else "dropped from the page cache"
    rows: list[tuple[str, tuple[int, int] | None, int, int]] = [
        (first, None, 0, page_cache_bytes(path))
    ]
    runner = TorchRunner.load(path, TorchOptions(device="cpu", threads=args.threads))
    if not runner.cfg.n_experts:
        parser.error(f"{path}: not a mixture-of-experts model")
    rows.append(("loaded", experts_chosen(runner), rss_file_bytes(path), page_cache_bytes(path)))
    total = args.prompt_tokens + args.decode
    table = list(range(total // 16 + 1))
    runner.init_kv(len(table), 16)
    ids = [(i * 7919) % (runner.cfg.vocab_size - 10) + 5 for i in range(args.prompt_tokens)]
    step = SeqStep(0, ids, list(range(len(ids))), 0, table)
    logits = runner.forward(ForwardBatch([step]))[0]
    stage = f"{args.prompt_tokens}-token prefill"
    rows.append((stage, experts_chosen(runner), rss_file_bytes(path), page_cache_bytes(path)))
    for pos in range(args.prompt_tokens, total):
        step = SeqStep(0, [int(logits[-1].argmax())], [pos], pos, table)
        logits = runner.forward(ForwardBatch([step]))[0]
    stage = f"+ {args.decode} decoded tokens"
    rows.append((stage, experts_chosen(runner), rss_file_bytes(path), page_cache_bytes(path)))
    print(f"{path.name}: {size / MIB:.1f} MiB")
    print(f"{'stage':32} {'experts chosen':>16} {'RssFile MiB':>12} {'page cache MiB':>15}")
    for name, chosen, rss, cached in rows:
        used = f"{chosen[0]} of {chosen[1]}" if chosen else "-"
        print(f"{name:32} {used:>16} {rss / MIB:12.1f} {cached / MIB:15.1f}")


if __name__ == "__main__":
    main()
