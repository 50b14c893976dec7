"""Random GGUF blocks for the quant tests: random bytes, with finite fp16 scales written over them."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
import torch
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

T = GGMLQuantizationType

# Byte offsets of each block's fp16 scale/min fields (every other bit pattern is a valid value).
FP16_OFFSETS: dict[GGMLQuantizationType, tuple[int, ...]] = {
    T.Q4_0: (0,),
    T.Q4_1: (0, 2),
    T.Q5_0: (0,),
    T.Q5_1: (0, 2),
    T.Q8_0: (0,),
    T.IQ4_NL: (0,),
    T.Q2_K: (80, 82),
    T.Q3_K: (108,),
    T.Q4_K: (0, 2),
    T.Q5_K: (0, 2),
    T.Q6_K: (208,),
    T.IQ4_XS: (0,),
}
SCALE_BYTES: dict[GGMLQuantizationType, int] = {T.MXFP4: 0}  # E8M0 scale byte offsets


def random_tensor(
    qtype: GGMLQuantizationType, rows: int, cols: int, seed: int = 0, scale: float = 0.01
) -> np.ndarray:
    """uint8 (rows, bytes per row) of random blocks; fp16 fields ~ N(0, scale), float types ~ N(0, 1)."""
    rng = np.random.default_rng(seed)
    if qtype == T.F32:
        return rng.standard_normal((rows, cols)).astype(np.float32).view(np.uint8)
    if qtype == T.F16:
        return rng.standard_normal((rows, cols)).astype(np.float16).view(np.uint8)
    if qtype == T.BF16:
        f = rng.standard_normal((rows, cols)).astype(np.float32)
        return (f.view(np.uint32) >> 16).astype(np.uint16).view(np.uint8)
    block_elements, block_bytes = GGML_QUANT_SIZES[qtype]
    n_blocks = rows * cols // block_elements
    blocks = rng.integers(0, 256, (n_blocks, block_bytes), dtype=np.uint8)
    for offset in FP16_OFFSETS.get(qtype, ()):
        values = (rng.standard_normal(n_blocks) * scale).astype(np.float16)
        blocks[:, offset : offset + 2] = values.view(np.uint8).reshape(n_blocks, 2)
    if qtype in SCALE_BYTES:  # powers of two around 2^-8 (e = 120), denormal-small ones too
        e = rng.integers(112, 128, n_blocks, dtype=np.uint8)
        e[:2] = (0, 1)  # ggml's two denormal scales
        blocks[:, SCALE_BYTES[qtype]] = e
    return blocks.reshape(rows, -1)


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread() -> Iterator[None]:
    """These tensors are small: one thread avoids OpenMP barrier stalls on a busy 2-core box."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
