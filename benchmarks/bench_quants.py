"""Quant formats: dequantize and conversion throughput (GB/s), and the error of each form the
torch runner converts GGUF weights to (engine/runners/torch/layers/quantize.build_linear).

    python benchmarks/bench_quants.py               # all three tables
    python benchmarks/bench_quants.py --errors      # only the error table
    python benchmarks/bench_quants.py --speed       # only the throughput table
    python benchmarks/bench_quants.py --matmul      # only the matmul timing table

Errors: real trained weights (the starter model's blk.0.ffn_down, 640 x 2048, dequantized) are
quantized to each format with ggml's own quantizer (ggml_quantize_chunk from llama.cpp's
libggml-base), then converted as the runner converts them (bf16 activations and scales);
W is the exact dequantization of those bytes. W' is what the decode kernel computes with
(the layer applied to identity rows, in chunks below the dense-prefill threshold). Weight
error: max|W' - W| / max|W| and mean|W' - W| / mean|W|; output error: the same for the layer's
output on X (8, 2048) standard normal against X @ W^T in float32.
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

from ember.engine.runners.torch.layers.linear import DENSE_PREFILL_TOKENS, QLinear  # noqa: E402
from ember.engine.runners.torch.layers.quantize import build_linear  # noqa: E402
from ember.engine.runners.torch.weights import (
    WeightTensor,  # noqa: E402
    resolve_format,  # noqa: E402
)
from ember.models.quants.dequant import dequantize  # noqa: E402

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


FORMATS = ("int4", "int8g", "int8", "dense")  # the runner's weight_format choices
DTYPE = torch.bfloat16  # the runner's default compute dtype on the CPU


def convert(
    raw: np.ndarray, qtype: GGMLQuantizationType, shape: tuple[int, int], fmt: str
) -> QLinear:
    """The layer the runner builds from these GGUF bytes (fmt "auto": the runner's own pick)."""
    t = WeightTensor("w", tuple(shape), int(qtype), raw=raw.reshape(-1))
    fmt = resolve_format(fmt, [t])
    return build_linear([t], [None], None, fmt, DTYPE, torch.device("cpu"))


def layer_weights(layer: QLinear) -> torch.Tensor:
    """float32 (out, in): the weights the decode kernel multiplies with (identity rows fed in
    chunks small enough to stay on the quantized path)."""
    eye = torch.eye(layer.in_features, dtype=DTYPE)
    step = DENSE_PREFILL_TOKENS - 1
    with torch.inference_mode():
        cols = [layer(eye[i : i + step]) for i in range(0, layer.in_features, step)]
    return torch.cat(cols).float().T


def error_rows(w_src: np.ndarray) -> list[tuple[str, str, float, float, float, float]]:
    """(format, form, weight max, weight mean, output max, output mean) relative errors."""
    x = torch.randn(8, w_src.shape[1], generator=torch.Generator().manual_seed(0))
    rows = []
    for qtype in ALL_TYPES:
        raw = ggml_quantize(w_src, qtype) if qtype != T.BF16 else _to_bf16_bytes(w_src)
        w = dequantize(raw, qtype, w_src.shape)
        y_ref = x @ w.T
        auto = convert(raw, qtype, w_src.shape, "auto").fmt
        for fmt in [auto] + [f for f in FORMATS if f != auto]:
            layer = convert(raw, qtype, w_src.shape, fmt)
            wm, wa = _rel(layer_weights(layer) - w, w)
            with torch.inference_mode():
                ym, ya = _rel(layer(x.to(DTYPE)).float() - y_ref, y_ref)
            rows.append((qtype.name, f"{fmt} (auto)" if fmt == auto else fmt, wm, wa, ym, ya))
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
    """(format, MB, dequantize GB/s, conversion (auto) GB/s, auto form) on random valid blocks."""
    from tests.models.quants.quant_blocks import random_tensor

    out: list[tuple[str, float, float, float, str]] = []
    for qtype in ALL_TYPES:
        raw = random_tensor(qtype, rows, cols, seed=1)
        gb = raw.nbytes / 1e9
        t_deq = _median_seconds(functools.partial(dequantize, raw, qtype, (rows, cols)), runs)
        t_conv = _median_seconds(
            functools.partial(convert, raw, qtype, (rows, cols), "auto"), max(1, runs // 2)
        )
        auto = convert(raw, qtype, (rows, cols), "auto").fmt
        out.append((qtype.name, raw.nbytes / 1e6, gb / t_deq, gb / t_conv, auto))
    return out


# Gemma 3 270M's linear shapes (out, in) and a 32k-row slice of its tied output head.
MATMUL_SHAPES = [(1024, 640), (256, 640), (640, 1024), (2048, 640), (640, 2048), (32768, 640)]


def matmul_rows(runs: int) -> list[tuple[str, int, dict[str, float]]]:
    """(shape, M, form -> median microseconds) of the layer on Q8_0 weights in each form."""
    from tests.models.quants.quant_blocks import random_tensor

    out: list[tuple[str, int, dict[str, float]]] = []
    for n, k in MATMUL_SHAPES:
        raw = random_tensor(T.Q8_0, n, k, seed=2)
        layers = {fmt: convert(raw, T.Q8_0, (n, k), fmt) for fmt in FORMATS}
        for m in (1, 16):
            x = torch.randn(m, k, dtype=DTYPE)
            with torch.inference_mode():
                times: dict[str, float] = {
                    fmt: 1e6 * _median_seconds(functools.partial(f, x), runs * 10)
                    for fmt, f in layers.items()
                }
            out.append((f"{n}x{k}", m, times))
    return out


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
        print(f"\nConversion error vs exact dequantization, source: {source}")
        print(
            "| format | form | weight max rel | weight mean rel | output max rel | output mean rel |"
        )
        print("|---|---|---|---|---|---|")
        for name, target, wm, wa, ym, ya in error_rows(w_src):
            print(f"| {name} | {target} | {wm:.2e} | {wa:.2e} | {ym:.2e} | {ya:.2e} |")
    if args.speed or not only:
        rows, cols = 2048, 4096
        print(f"\nThroughput on a {rows}x{cols} tensor, median of {args.runs} runs (GB/s of input)")
        print("| format | MB | dequantize GB/s | conversion (auto) GB/s | auto form |")
        print("|---|---|---|---|---|")
        for name, mb, deq, rep, target in speed_rows(rows, cols, args.runs):
            print(f"| {name} | {mb:.1f} | {deq:.3g} | {rep:.3g} | {target} |")
    if args.matmul or not only:
        print(f"\nlayer(x) in microseconds, median of {args.runs * 10} runs, x bf16 (M, in)")
        print("| weight (out x in) | M | " + " | ".join(FORMATS) + " |")
        print("|---|---|" + "---|" * len(FORMATS))
        for shape, m, times in matmul_rows(args.runs):
            cells = " | ".join(f"{times[k]:.0f}" for k in FORMATS)
            print(f"| {shape} | {m} | {cells} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
