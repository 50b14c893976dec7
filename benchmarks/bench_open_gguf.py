"""Open the starter GGUF with open_gguf (validated) and with gguf.GGUFReader, side by side.

Run by hand from the checkout root: python -m benchmarks.bench_open_gguf [path.gguf] [repeats]
Prints the median seconds of each and their ratio.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path


def _median_seconds(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    import gguf

    from ember.models.files.gguf import open_gguf

    if len(sys.argv) > 1:
        path = Path(sys.argv[1])
    else:
        from ember.models.registry.starter import starter_path

        path = starter_path(Path(__file__).resolve().parents[1] / "tests" / ".cache" / "models")
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    open_gguf(path)  # warm the page cache and imports
    ours = _median_seconds(lambda: open_gguf(path), repeats)
    vocab = _median_seconds(
        lambda: open_gguf(path).metadata_array("tokenizer.ggml.tokens"), repeats
    )
    theirs = _median_seconds(lambda: gguf.GGUFReader(str(path)), max(1, repeats // 2))
    print(f"{path.name}: {path.stat().st_size} bytes")
    print(f"open_gguf (header check, hparams, shape check)  median {ours:.3f} s")
    print(f"open_gguf + decode the vocabulary               median {vocab:.3f} s")
    print(f"gguf.GGUFReader                                 median {theirs:.3f} s")
    print(f"ratio GGUFReader / open_gguf: {theirs / ours:.1f}x")


if __name__ == "__main__":
    main()
