"""Named weight tensors from a GGUF file (quantized mmap views) or an HF safetensors folder.

Names are GGUF's (`blk.0.attn_q.weight`); the arch modules map HF names onto them. Shapes are
(out, in) numpy order. Quantized GGUF tensors stay in the mmap until a layer asks for them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from ember.models.errors import ModelFileError

# GGML type ids (gguf.GGMLQuantizationType values) grouped by the packed form they map to
F32, F16, BF16 = 0, 1, 30
INT4_SOURCES = frozenset({2, 3, 10, 11, 12, 20, 23})  # Q4_0 Q4_1 Q2_K Q3_K Q4_K IQ4_NL IQ4_XS
# Q5_0 Q5_1 Q8_0 Q8_1 Q5_K Q6_K Q8_K, and MXFP4 (its doubled E2M1 codes span -12..12)
INT8_SOURCES = frozenset({6, 7, 8, 9, 13, 14, 15, 39})


@dataclass
class WeightTensor:
    """One tensor: raw GGUF bytes with a GGML type, or a lazily loaded torch tensor."""

    name: str
    shape: tuple[int, ...]  # numpy order: (out, in) for matrices
    qtype: int  # GGML type id (F32 for safetensors floats)
    raw: Any = None  # GGUF: uint8 / float numpy mmap view
    load: Callable[[], torch.Tensor] | None = None  # safetensors: reads the tensor
    # a safetensors expert stack (n_experts, out, in): one loader per expert's (out, in) matrix
    # (float; for a quantized qtype, gpt-oss's MXFP4: that expert's GGUF blocks as uint8)
    expert_loads: list[Callable[[], torch.Tensor]] | None = None

    def expert(self, e: int) -> WeightTensor:
        """Expert e of a stacked (n_experts, out, in) tensor as its own (out, in) tensor: in a
        GGUF file a view of that expert's bytes only (the other experts' pages stay unread)."""
        if not 0 <= e < self.shape[0] or len(self.shape) != 3:
            raise IndexError(f"{self.name}: no expert {e} in shape {self.shape}")
        name, shape = f"{self.name}[{e}]", self.shape[1:]
        if self.expert_loads is not None:
            if self.qtype not in (F32, F16, BF16):  # its bytes, read when the expert is made
                return WeightTensor(name, shape, self.qtype, raw=self.expert_loads[e]().numpy())
            return WeightTensor(name, shape, self.qtype, load=self.expert_loads[e])
        if self.raw is not None:
            per = self.raw.size // self.shape[0]
            return WeightTensor(name, shape, self.qtype, raw=self.raw[e * per : (e + 1) * per])
        assert self.load is not None
        whole = self.load
        return WeightTensor(name, shape, self.qtype, load=lambda: whole()[e])

    def to_float(self) -> torch.Tensor:
        """The whole tensor dequantized to float32."""
        with naming(self.name):
            if self.load is not None:
                return self.load().float().reshape(self.shape)
            return _dequantize(self.raw, self.qtype, self.shape)

    def row_chunks(self, chunk_rows: int) -> Iterator[torch.Tensor]:
        """The tensor as float32 (rows, cols) chunks of chunk_rows rows (bounded temporaries)."""
        if self.load is not None or len(self.shape) != 2:
            yield self.to_float()
            return
        rows, cols = self.shape
        row_bytes = self.raw.size // rows
        for start in range(0, rows, chunk_rows):
            stop = min(rows, start + chunk_rows)
            with naming(self.name):
                chunk = self.raw[start * row_bytes : stop * row_bytes]
                out = _dequantize(chunk, self.qtype, (stop - start, cols))
            yield out

    def rows(self, ids: torch.Tensor) -> torch.Tensor:
        """float32 rows `ids` of a (rows, cols) tensor, reading only those rows."""
        with naming(self.name):
            if self.load is not None:
                return self.load().index_select(0, ids).float()
            return _dequantize_rows(self.raw, self.qtype, self.shape, ids)


@contextmanager
def naming(name: str) -> Iterator[None]:
    """A ModelFileError raised while reading tensor `name` (an MXFP4 block's bad scale, say)
    says which tensor, once."""
    try:
        yield
    except ModelFileError as err:
        if str(err).startswith(f"{name}: "):
            raise
        raise ModelFileError(f"{name}: {err}") from None


def _dequantize(raw: Any, qtype: int, shape: tuple[int, ...]) -> torch.Tensor:
    from gguf import GGMLQuantizationType

    from ember.models.quants.dequant import dequantize

    return dequantize(raw, GGMLQuantizationType(qtype), shape)


def _dequantize_rows(
    raw: Any, qtype: int, shape: tuple[int, ...], ids: torch.Tensor
) -> torch.Tensor:
    from gguf import GGMLQuantizationType

    from ember.models.quants.dequant import dequantize_rows

    return dequantize_rows(raw, GGMLQuantizationType(qtype), shape, ids)


def unpermute_rope_rows(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Undo llama.cpp's Q/K row permutation (interleaved RoPE pairs -> HF half-split layout)."""
    rows = w.shape[0]
    head_dim = rows // n_heads
    # convert_hf_to_gguf: w.reshape(H, 2, D/2, ...).swapaxes(1, 2); the inverse swaps back
    return w.reshape(n_heads, head_dim // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def resolve_format(option: str, tensors: list[WeightTensor]) -> str:
    """auto: 4-bit sources -> int4, 5..8-bit -> int8g (8-bit groups; the finest member of a fused group wins)."""
    if option != "auto":
        return option
    qtypes = {t.qtype for t in tensors}
    if qtypes <= INT4_SOURCES:
        return "int4"
    if qtypes <= INT4_SOURCES | INT8_SOURCES:
        return "int8g"
    return "dense"
