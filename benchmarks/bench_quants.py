"""Quant formats: dequantize/repack throughput (GB/s) and the error of each repack mapping.

    python benchmarks/bench_quants.py               # both tables
    python benchmarks/bench_quants.py --errors      # only the error table
    python benchmarks/bench_quants.py --speed       # only the throughput table

Errors: real trained weights (the starter model's blk.0.ffn_down, 640 x 2048, dequantized) are
quantized to each format with ggml's own quantizer (ggml_quantize_chunk from llama.cpp's
libggml-base), then repacked; W is the exact dequantization of those bytes. Weight error:
max|W' - W| / max|W| and mean|W' - W| / mean|W|; output error: the same for
Y = matmul(X, packed) against X @ W^T in float32, with X (8, 2048) standard normal.
Throughput: random valid blocks, a 2048 x 4096 tensor; GB/s of quantized input consumed,
median of several runs.
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ember.models.quants.dequant import dequantize  # noqa: E402
from ember.models.quants.repack import (  # noqa: E402
    Target,
    auto_target,
    matmul,
    packed_to_float,
    repack,
)

T = GGMLQuantizationType
QUANT_TYPES = [
    T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K,
    T.IQ4_NL, T.IQ4_XS,
]  # fmt: skip
ALL_TYPES = [T.F32, T.F16, T.BF16, *QUANT_TYPES]


def ggml_quantize(w: np.ndarray, qtype: GGMLQuantizationType) -> np.ndarray:
    """float32 (rows, cols) -> GGUF bytes (rows, row_bytes) through ggml's reference quantizer."""
    import llama_cpp

    if qtype == T.F32:
        return w.astype(np.float32).view(np.uint8)
    if qtype == T.F16:
        return w.astype(np.float16).view(np.uint8)
    lib = ctypes.CDLL(os.path.join(os.path.dirname(llama_cpp.__file__), "lib", "libggml-base.so"))
    fn = lib.ggml_quantize_chunk
    fn.restype = ctypes.c_size_t
    # ggml_quantize_chunk(type, src, dst, start, nrows, n_per_row, imatrix)
    i64 = ctypes.c_int64
    fn.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, i64, i64, i64, ctypes.c_void_p]
    rows, cols = w.shape
    block_elements, block_bytes = GGML_QUANT_SIZES[qtype]
    out = np.empty((rows, cols // block_elements * block_bytes), dtype=np.uint8)
    src = np.ascontiguousarray(w, dtype=np.float32)
    written = fn(int(qtype), src.ctypes.data, out.ctypes.data, 0, rows, cols, None)
    assert written == out.nbytes, (qtype.name, written, out.nbytes)
    return out


def source_weights() -> tuple[np.ndarray, str]:
    """Real weights from the starter model if it is installed, else a Gaussian stand-in."""
    try:
        from ember.models.files.gguf import open_gguf
        from ember.models.registry.starter import starter_installed, starter_path

        if starter_installed():
            path = starter_path(Path(__file__).resolve().parent.parent / "tests/.cache/models")
            t = open_gguf(path).tensors["blk.0.ffn_down.weight"]
            w = dequantize(t.raw, t.qtype, t.shape).numpy()
            return w, f"starter blk.0.ffn_down ({t.qtype.name}, {t.shape[0]}x{t.shape[1]})"
    except ImportError:
        pass
    w = np.random.default_rng(0).standard_normal((640, 2048)).astype(np.float32) * 0.02
    return w, "Gaussian 640x2048"


def _rel(err: torch.Tensor, ref: torch.Tensor) -> tuple[float, float]:
    return float(err.abs().max() / ref.abs().max()), float(err.abs().mean() / ref.abs().mean())


def mapped_weights(raw: np.ndarray, qtype: GGMLQuantizationType, shape, packed) -> torch.Tensor:
    """The float32 weights a PackedWeight stands for. int4 forms come from the mapping math
    (quants_int4) rather than the kernel on an identity matrix, which is slow at K = 2048; the
    tests check that the kernel agrees with that math."""
    from ember.models.quants.dequant import DEQUANTIZERS
    from ember.models.quants.int4 import dequant_int4, int4_groups, int4x2_groups

    if packed.kind not in ("int4", "int4x2"):
        return packed_to_float(packed)
    blocks = torch.from_numpy(raw).reshape(-1, GGML_QUANT_SIZES[qtype][1])
    deq, dtype = DEQUANTIZERS[qtype], packed.dtype
    if packed.kind == "int4":
        return dequant_int4(*int4_groups(qtype, blocks, deq, dtype)).reshape(shape)
    hi, lo = int4x2_groups(qtype, blocks, deq, dtype)
    return (dequant_int4(*hi) + dequant_int4(*lo)).reshape(shape)


def error_rows(w_src: np.ndarray) -> list[tuple[str, str, float, float, float, float]]:
    """(format, target, weight max, weight mean, output max, output mean) relative errors."""
    x = torch.randn(8, w_src.shape[1], generator=torch.Generator().manual_seed(0))
    rows = []
    for qtype in ALL_TYPES:
        raw = ggml_quantize(w_src, qtype) if qtype != T.BF16 else _to_bf16_bytes(w_src)
        w = dequantize(raw, qtype, w_src.shape)
        y_ref = x @ w.T
        auto = auto_target(qtype)
        others = ("int4", "int4x2", "int8") if qtype != T.F32 else ()
        targets = [auto] + [t for t in others if t != auto]
        for target in targets:
            packed = repack(raw, qtype, w_src.shape, target)  # type: ignore[arg-type]
            wm, wa = _rel(mapped_weights(raw, qtype, w_src.shape, packed) - w, w)
            ym, ya = _rel(matmul(x, packed) - y_ref, y_ref)
            label = f"{target} (auto)" if target == auto else target
            rows.append((qtype.name, label, wm, wa, ym, ya))
    return rows


def _to_bf16_bytes(w: np.ndarray) -> np.ndarray:
    return torch.from_numpy(w).to(torch.bfloat16).view(torch.uint8).numpy()


def _median_seconds(fn: Callable[[], object], runs: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def speed_rows(rows: int, cols: int, runs: int) -> list[tuple[str, float, float, float, str]]:
    """(format, MB, dequantize GB/s, repack-auto GB/s, auto target) on random valid blocks."""
    from tests.models.quants.quant_blocks import random_tensor

    out: list[tuple[str, float, float, float, str]] = []
    for qtype in ALL_TYPES:
        raw = random_tensor(qtype, rows, cols, seed=1)
        gb = raw.nbytes / 1e9
        t_deq = _median_seconds(functools.partial(dequantize, raw, qtype, (rows, cols)), runs)
        t_rep = _median_seconds(
            functools.partial(repack, raw, qtype, (rows, cols)), max(1, runs // 2)
        )
        out.append((qtype.name, raw.nbytes / 1e6, gb / t_deq, gb / t_rep, auto_target(qtype)))
    return out


# Gemma 3 270M's linear shapes (out, in) and a 32k-row slice of its tied output head.
MATMUL_SHAPES = [(1024, 640), (256, 640), (640, 1024), (2048, 640), (640, 2048), (32768, 640)]


def matmul_rows(runs: int) -> list[tuple[str, int, dict[str, float]]]:
    """(shape, M, kind -> median microseconds) of matmul on Q8_0 weights repacked to each kind."""
    from tests.models.quants.quant_blocks import random_tensor

    out: list[tuple[str, int, dict[str, float]]] = []
    for n, k in MATMUL_SHAPES:
        raw = random_tensor(T.Q8_0, n, k, seed=2)
        packed = {kind: repack(raw, T.Q8_0, (n, k), kind) for kind in MATMUL_KINDS}
        for m in (1, 16):
            x = torch.randn(m, k, dtype=torch.bfloat16)
            times: dict[str, float] = {
                kind: 1e6 * _median_seconds(functools.partial(matmul, x, p), runs * 10)
                for kind, p in packed.items()
            }
            out.append((f"{n}x{k}", m, times))
    return out


MATMUL_KINDS: tuple[Target, ...] = ("int4", "int4x2", "int8", "bf16")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--errors", action="store_true", help="only the error table")
    parser.add_argument("--speed", action="store_true", help="only the throughput table")
    parser.add_argument("--matmul", action="store_true", help="only the matmul timing table")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, load average {load}")
    only = args.errors or args.speed or args.matmul
    if args.errors or not only:
        w_src, source = source_weights()
        print(f"\nRepack error vs exact dequantization, source: {source}")
        print(
            "| format | target | weight max rel | weight mean rel | matmul max rel | matmul mean rel |"
        )
        print("|---|---|---|---|---|---|")
        for name, target, wm, wa, ym, ya in error_rows(w_src):
            print(f"| {name} | {target} | {wm:.2e} | {wa:.2e} | {ym:.2e} | {ya:.2e} |")
    if args.speed or not only:
        rows, cols = 2048, 4096
        print(f"\nThroughput on a {rows}x{cols} tensor, median of {args.runs} runs (GB/s of input)")
        print("| format | MB | dequantize GB/s | repack (auto) GB/s | auto target |")
        print("|---|---|---|---|---|")
        for name, mb, deq, rep, target in speed_rows(rows, cols, args.runs):
            print(f"| {name} | {mb:.1f} | {deq:.3g} | {rep:.3g} | {target} |")
    if args.matmul or not only:
        print(
            f"\nmatmul(x, packed) in microseconds, median of {args.runs * 10} runs, x bf16 (M, in)"
        )
        print("| weight (out x in) | M | " + " | ".join(MATMUL_KINDS) + " |")
        print("|---|---|" + "---|" * len(MATMUL_KINDS))
        for shape, m, times in matmul_rows(args.runs):
            cells = " | ".join(f"{times[k]:.0f}" for k in MATMUL_KINDS)
            print(f"| {shape} | {m} | {cells} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
