"""Dequantizers: bit-exact against gguf.quants.dequantize on random blocks and on the real model."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType
from gguf import quants as gguf_quants

from ember.models.errors import ModelFileError
from ember.models.files.gguf import GGUFTensor, open_gguf
from ember.models.quants.dequant import SUPPORTED_TYPES, dequantize, dequantize_rows
from tests.models.quants.quant_blocks import one_torch_thread, random_tensor

__all__ = ["one_torch_thread"]  # the autouse fixture applies to this module

T = GGMLQuantizationType
ALL_TYPES = [
    T.F32, T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0,
    T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K, T.IQ4_NL, T.IQ4_XS, T.MXFP4,
]  # fmt: skip


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


def _shape(qtype: GGMLQuantizationType, rows: int, blocks_per_row: int) -> tuple[int, int]:
    block_elements = GGML_QUANT_SIZES[qtype][0]
    return rows, block_elements * blocks_per_row if block_elements > 1 else 64 * blocks_per_row


def test_supported_types_are_the_issue_list() -> None:
    assert set(SUPPORTED_TYPES) == set(ALL_TYPES)


@pytest.mark.parametrize("qtype", ALL_TYPES, ids=lambda t: t.name)
def test_dequantize_is_bit_exact_on_random_blocks(qtype: GGMLQuantizationType) -> None:
    rows, cols = _shape(qtype, 24, 3)
    raw = random_tensor(qtype, rows, cols, seed=int(qtype))
    ref = gguf_quants.dequantize(raw, qtype).astype(np.float32, copy=False)
    got = dequantize(raw, qtype, (rows, cols))
    assert got.dtype == torch.float32 and tuple(got.shape) == (rows, cols)
    assert _same_bits(got.numpy(), ref.reshape(rows, cols))
    # A torch tensor input gives the same result.
    assert _same_bits(dequantize(torch.from_numpy(raw), qtype, (rows, cols)).numpy(), got.numpy())


@pytest.mark.parametrize("qtype", ALL_TYPES, ids=lambda t: t.name)
def test_dequantize_rows_matches_whole_tensor(qtype: GGMLQuantizationType) -> None:
    rows, cols = _shape(qtype, 40, 2)
    raw = random_tensor(qtype, rows, cols, seed=7)
    full = dequantize(raw, qtype, (rows, cols)).numpy()
    ids = [39, 0, 5, 5, 17]
    got = dequantize_rows(raw, qtype, (rows, cols), ids)
    assert _same_bits(got.numpy(), full[ids])
    assert tuple(dequantize_rows(raw, qtype, (rows, cols), []).shape) == (0, cols)


def test_chunked_dequantize_equals_unchunked(monkeypatch: pytest.MonkeyPatch) -> None:
    import ember.models.quants.dequant as quants

    raw = random_tensor(T.Q6_K, 33, 512, seed=3)
    whole = dequantize(raw, T.Q6_K, (33, 512)).numpy()
    monkeypatch.setattr(quants, "CHUNK_ELEMENTS", 1024)  # two rows per chunk
    assert _same_bits(dequantize(raw, T.Q6_K, (33, 512)).numpy(), whole)


def test_higher_rank_shapes_keep_their_shape() -> None:
    raw = random_tensor(T.Q8_0, 6, 64, seed=1)
    out = dequantize(raw, T.Q8_0, (2, 3, 64))
    assert tuple(out.shape) == (2, 3, 64)
    assert _same_bits(out.reshape(6, 64).numpy(), dequantize(raw, T.Q8_0, (6, 64)).numpy())


def test_unsupported_type_names_it() -> None:
    with pytest.raises(ModelFileError, match="IQ2_XXS"):
        dequantize(np.zeros(66, dtype=np.uint8), T.IQ2_XXS, (1, 256))


def test_bad_sizes_are_model_file_errors() -> None:
    with pytest.raises(ModelFileError, match="multiple of its block"):
        dequantize(np.zeros(36, dtype=np.uint8), T.Q4_0, (1, 48))
    with pytest.raises(ModelFileError, match="needs 36 bytes, got 18"):
        dequantize(np.zeros(18, dtype=np.uint8), T.Q4_0, (1, 64))
    with pytest.raises(ModelFileError, match="out of range"):
        dequantize_rows(np.zeros(36, dtype=np.uint8), T.Q4_0, (2, 32), [2])


def _resident_pages(buf: np.ndarray) -> np.ndarray:
    """mincore(2) residency of each page of an mmap-backed array (Linux)."""
    import ctypes
    import mmap

    libc = ctypes.CDLL(None, use_errno=True)
    pages = -(-buf.nbytes // mmap.PAGESIZE)
    vec = (ctypes.c_ubyte * pages)()
    addr = ctypes.c_void_p(buf.ctypes.data)
    assert libc.mincore(addr, ctypes.c_size_t(buf.nbytes), vec) == 0, ctypes.get_errno()
    return np.ctypeslib.as_array(vec) & 1


def test_dequantize_rows_reads_only_those_rows(tmp_path) -> None:
    # A sparse file (never written, so no page is cached) read through a read-only mmap:
    # afterwards only the pages holding the requested rows may be resident.
    import mmap
    import sys

    if not sys.platform.startswith("linux"):
        pytest.skip("mincore residency check is Linux-only")
    rows, cols = 4096, 1024  # Q8_0: 1088 bytes per row, ~4.4 MB
    path = tmp_path / "holes.bin"
    with path.open("wb") as f:
        f.truncate(rows * cols // 32 * 34)
    with path.open("rb") as f:
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    mapped.madvise(mmap.MADV_RANDOM)  # no kernel read-ahead: residency shows our reads alone
    view = np.frombuffer(mapped, dtype=np.uint8)
    assert _resident_pages(view).sum() == 0
    ids = [5, 2000, 4000]
    out = dequantize_rows(view, T.Q8_0, (rows, cols), ids)
    assert out.abs().sum() == 0
    resident = np.flatnonzero(_resident_pages(view))
    row_bytes = cols // 32 * 34
    page = mmap.PAGESIZE
    allowed = {
        p for r in ids for p in range(r * row_bytes // page, ((r + 1) * row_bytes - 1) // page + 1)
    }
    assert 0 < len(resident) and set(resident.tolist()) <= allowed


@pytest.fixture(scope="module")
def starter_tensors(starter_gguf) -> dict[str, GGUFTensor]:
    return open_gguf(starter_gguf).tensors


@pytest.mark.model
def test_real_tensors_are_bit_exact(starter_tensors: dict[str, GGUFTensor]) -> None:
    by_type: dict[GGMLQuantizationType, GGUFTensor] = {}
    for tensor in starter_tensors.values():  # the first of each type, but not the huge embedding
        if tensor.name != "token_embd.weight":
            by_type.setdefault(tensor.qtype, tensor)
    assert {T.F32, T.Q4_K, T.Q5_0, T.Q6_K, T.Q8_0} <= set(by_type)
    for qtype, tensor in by_type.items():
        ref = gguf_quants.dequantize(tensor.data, qtype).reshape(tensor.shape)
        assert _same_bits(dequantize(tensor.raw, qtype, tensor.shape).numpy(), ref), qtype.name


@pytest.mark.model
def test_real_embedding_rows(starter_tensors: dict[str, GGUFTensor]) -> None:
    emb = starter_tensors["token_embd.weight"]
    ids = [0, 2, 106, 107, 1000, emb.shape[0] - 1]
    ref = gguf_quants.dequantize(emb.data[ids], emb.qtype)
    got = dequantize_rows(emb.raw, emb.qtype, emb.shape, ids)
    assert _same_bits(got.numpy(), ref)
