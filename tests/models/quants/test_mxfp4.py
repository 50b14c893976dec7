"""MXFP4 against llama.cpp's own C code (ggml's dequantize_row_mxfp4 and quantize_row_mxfp4_ref
in the libggml-base that llama-cpp-python ships), transformers' dequantizer of a Hugging Face
checkpoint's blocks/scales, and bad scale bytes refused in one line naming the tensor."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType

from ember.engine.runners.torch.weights import WeightTensor
from ember.models.errors import ModelFileError
from ember.models.quants.dequant import dequantize
from ember.models.quants.int4 import int4x2_groups
from ember.models.quants.mxfp4 import (
    BLOCK_BYTES,
    affine_mxfp4,
    dequant_mxfp4,
    ggml_blocks_from_hf,
)
from tests.models.quants.quant_blocks import random_tensor

T = GGMLQuantizationType


@pytest.fixture(scope="module")
def ggml() -> ctypes.CDLL:
    """libggml-base from llama-cpp-python, with the two MXFP4 row functions declared."""
    import llama_cpp

    lib = ctypes.CDLL(str(Path(llama_cpp.__file__).parent / "lib" / "libggml-base.so"))
    lib.dequantize_row_mxfp4.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    lib.quantize_row_mxfp4_ref.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    return lib


def _llama_dequant(lib: ctypes.CDLL, blocks: np.ndarray) -> np.ndarray:
    blocks = np.ascontiguousarray(blocks, dtype=np.uint8)
    n = blocks.size // BLOCK_BYTES * 32
    out = np.empty(n, dtype=np.float32)
    lib.dequantize_row_mxfp4(blocks.ctypes.data, out.ctypes.data, n)
    return out


def test_dequantize_is_bit_exact_against_llamacpp(ggml: ctypes.CDLL) -> None:
    """Random codes under every finite scale byte (0..0xFC, the denormal 0 and 1 included)."""
    rng = np.random.default_rng(0)
    blocks = rng.integers(0, 256, (253 * 4, BLOCK_BYTES), dtype=np.uint8)
    blocks[:, 0] = np.repeat(np.arange(253, dtype=np.uint8), 4)
    ours = dequantize(blocks, T.MXFP4, (len(blocks), 32)).numpy().reshape(-1)
    theirs = _llama_dequant(ggml, blocks)
    assert np.array_equal(ours.view(np.uint32), theirs.view(np.uint32))


def test_llamacpp_quantized_rows_dequantize_the_same(ggml: ctypes.CDLL) -> None:
    """Weights quantized by llama.cpp's reference quantizer read back as llama.cpp reads them."""
    x = (np.random.default_rng(1).standard_normal(64 * 32) * 0.05).astype(np.float32)
    blocks = np.empty(64 * BLOCK_BYTES, dtype=np.uint8)
    ggml.quantize_row_mxfp4_ref(x.ctypes.data, blocks.ctypes.data, x.size)
    ours = dequantize(blocks, T.MXFP4, (64, 32)).numpy().reshape(-1)
    assert np.array_equal(ours, _llama_dequant(ggml, blocks))
    assert np.abs(ours - x).max() < 0.25 * np.abs(x).max()  # a 4-bit grid: close, not exact


def test_affine_form_is_exact() -> None:
    """u a + b (the int8g repacking's form) and the two int4 planes give the weights exactly."""
    blocks = torch.from_numpy(random_tensor(T.MXFP4, 16, 64, seed=2)).reshape(-1, BLOCK_BYTES)
    exact = dequant_mxfp4(blocks)
    u, a, b = affine_mxfp4(blocks)
    assert torch.equal(u.float() * a + b, exact)
    assert int(u.max()) <= 24
    hi, lo = int4x2_groups(T.MXFP4, blocks, dequant_mxfp4, torch.bfloat16)
    planes = [(q.float() - 8) * s.float()[:, None] + z.float()[:, None] for q, s, z in (hi, lo)]
    assert torch.equal(planes[0] + planes[1], exact)


def test_hf_blocks_repack_to_what_transformers_dequantizes() -> None:
    """A checkpoint's (E, rows, G, 16) blocks and (E, rows, G) scales: our GGUF repacking
    dequantizes to transformers' own reading (before its transpose)."""
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors

    rng = np.random.default_rng(3)
    blocks = torch.from_numpy(rng.integers(0, 256, (2, 6, 4, 16), dtype=np.uint8))
    scales = torch.from_numpy(rng.integers(120, 134, (2, 6, 4), dtype=np.uint8))
    theirs = convert_moe_packed_tensors(blocks, scales, dtype=torch.float32)  # (E, in, out)
    packed = ggml_blocks_from_hf(blocks, scales)  # (E, rows, G * 17)
    ours = dequantize(packed.numpy(), T.MXFP4, (2, 6, 4 * 32))
    assert torch.equal(ours, theirs.transpose(1, 2))


def test_hf_blocks_of_the_wrong_shape_are_refused() -> None:
    with pytest.raises(ModelFileError, match="do not fit scales"):
        ggml_blocks_from_hf(torch.zeros(2, 3, 16, dtype=torch.uint8), torch.zeros(2, 4))


@pytest.mark.parametrize(
    ("scale", "code", "why"),
    [
        (0xFF, 1, "0xFF (NaN in the MX format)"),
        (0xFF, 0, "0xFF (NaN in the MX format)"),
        (0xFD, 7, "0xFD (its values overflow float32)"),  # 12 * 2^125
        (0xFE, 6, "0xFE (its values overflow float32)"),  # 8 * 2^126
    ],
)
def test_a_bad_scale_is_one_line_naming_the_tensor(scale: int, code: int, why: str) -> None:
    raw = random_tensor(T.MXFP4, 4, 64, seed=4).reshape(-1)  # as the mmap gives it: flat bytes
    raw.reshape(-1, BLOCK_BYTES)[5] = [scale] + [code | code << 4] * 16  # row 2's second block
    tensor = WeightTensor("blk.0.ffn_up_exps.weight", (4, 64), int(T.MXFP4), raw=raw)
    readers = (
        tensor.to_float,
        lambda: list(tensor.row_chunks(2)),
        lambda: tensor.rows(torch.tensor([2])),
    )
    for read in readers:
        with pytest.raises(ModelFileError) as info:
            read()
        message = str(info.value)
        assert message == f"blk.0.ffn_up_exps.weight: an MXFP4 block has scale byte {why}"


def test_large_scales_that_stay_finite_are_kept() -> None:
    """0xFC with the largest code, 0xFD with small ones: finite, so they are weights."""
    blocks = torch.zeros(2, BLOCK_BYTES, dtype=torch.uint8)
    blocks[0, 0], blocks[0, 1:] = 0xFC, 0x77  # 12 * 2^124
    blocks[1, 0], blocks[1, 1:] = 0xFD, 0x44  # 4 * 2^125
    values = dequant_mxfp4(blocks)
    assert torch.isfinite(values).all()
    assert float(values[0, 0]) == 12 * 2.0**124 and float(values[1, 0]) == 4 * 2.0**125
