"""A prompt-sized batch times a GGUF weight as bfloat16 matmuls (AMX / AVX-512 BF16 hardware).

Where the CPU multiplies bfloat16 in hardware (Intel AMX, AVX-512 BF16), torch's bfloat16
matmul runs 2.5x the native 8-bit kernels' multiply-adds per second (Xeon, 162 vs 60-66
GMAC/s a thread). The weight is dequantized row chunk by row chunk into one small bfloat16
buffer (CHUNK_BYTES: it stays in the core's cache, and no model-sized copy is ever made) and
each chunk multiplies the whole batch at once:

    y[:, rows] = (W[rows] (n, in) @ x^T (in, T))^T     (n, T) per chunk, into y (T, out)

x goes to bfloat16 as it is, not through the native kernels' 8-bit rounding first (act_rounding,
which the float32 path keeps): two roundings in a row cost the starter 1.6-1.8 points of top-1
agreement with llama.cpp on its 512-token text (0.941 against 0.957-0.959 unrounded, Xeon) and
put its perplexity at 1.006-1.014x llama.cpp's depending on the attention kernel's summation
order and the thread count, against 0.993-0.997x (with the fused prompt attention: 1.012x
against 0.993x, the 1% bar between them). The products accumulate in float32 inside the
matmul and are stored as bfloat16, so y differs from the float32 path by bfloat16 steps (2^-9
relative). Whether this path runs is measured per shape (native/choice.py, path "bf16"; never
for F32, F16 or Q8_0 weights: choice.BF16_TYPES).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from ember.engine.runners.torch.native.kernels import Kernels, NativeLinear

# one bfloat16 weight chunk, about a core's L2: the 1.2B model's layer, 2 threads, Xeon, three
# runs, ms at 64 / 512 tokens: 512 KiB 34-52 / 140-202, 1 MiB 26-39 / 90-160, 2 MiB 20-25 /
# 101-114, 4 MiB 19-23 / 93-108 (and twice the buffer)
CHUNK_BYTES = 2 << 20


def chunk_rows(cols: int) -> int:
    """Weight rows per chunk: CHUNK_BYTES of bfloat16, a multiple of 16, at least 16."""
    return max(16, (CHUNK_BYTES // (2 * cols)) // 16 * 16)


def bf16_product(kernels: Kernels, native: NativeLinear, x: torch.Tensor) -> torch.Tensor:
    """x (T, in) float32 -> (T, out) float32 = x W^T with W's parts in bfloat16 (the caller
    adds the bias, as for the float32 path)."""
    desc, tokens = native.desc, x.shape[0]
    cols = native.in_features
    rows = chunk_rows(cols)
    chunk = torch.empty(rows, cols, dtype=torch.bfloat16)
    scratch = torch.empty(torch.get_num_threads() * cols, dtype=torch.float32)
    product = torch.empty(rows, tokens, dtype=torch.bfloat16)
    xt = x.to(torch.bfloat16).t()  # (in, T)
    y = torch.empty(tokens, native.out_features, dtype=torch.float32)  # in the parts' order
    start = 0
    for i in range(desc.n_parts):
        part = desc.part[i]
        for r in range(0, int(part.rows), rows):
            n = min(rows, int(part.rows) - r)
            kernels.dequantize_bf16(part, r, chunk[:n], scratch)
            torch.mm(chunk[:n], xt, out=product[:n])  # (n, T)
            y[:, start + r : start + r + n].copy_(product[:n].t())
        start += int(part.rows)
    perm = native.out_permutation()
    if perm is not None:  # part row i is output column perm[i]
        y = torch.empty_like(y).index_copy_(1, perm, y)
    return y
