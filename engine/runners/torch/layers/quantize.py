"""Build a QLinear from one or more file tensors (fused along the output dim) in a chosen format."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import torch

from ember.engine.runners.torch.layers.linear import QLinear
from ember.engine.runners.torch.layers.pack import (
    INT4_GROUP,
    Int4Codes,
    Int4Weight,
    Int8Weight,
    quantize_int8,
    quantize_int8g,
)
from ember.engine.runners.torch.weights import BF16, F16, F32, WeightTensor, naming

if TYPE_CHECKING:
    from gguf import GGMLQuantizationType

FLOAT_TYPES = frozenset({F32, F16, BF16})

RowFix = Callable[[torch.Tensor], torch.Tensor]  # a row permutation (llama GGUF Q/K), or identity


def _fitted_int4(w: torch.Tensor) -> Int4Codes:
    """Least-squares int4 grid per group of 32 (models.quants_int4's fit) from float weights."""
    from ember.models.quants.int4 import fit_affine

    n, k = w.shape
    groups = w.float().reshape(-1, INT4_GROUP)
    a, b = fit_affine(groups)
    return _codes(groups, a, b, n, k)


def _codes(groups: torch.Tensor, a: torch.Tensor, b: torch.Tensor, n: int, k: int) -> Int4Codes:
    safe = torch.where(a == 0, torch.ones_like(a), a)
    q = torch.round((groups - b) / safe).clamp(0, 15).to(torch.int32)
    return Int4Codes(
        q.view(n, k), a.view(n, k // INT4_GROUP), (b + 8.0 * a).view(n, k // INT4_GROUP)
    )


def _gguf_blocks(
    t: WeightTensor, start: int, stop: int
) -> tuple[GGMLQuantizationType, torch.Tensor]:
    """(GGML type, uint8 blocks (n_blocks, block_bytes)) of rows start:stop of a GGUF tensor."""
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    from ember.models.quants.dequant import as_uint8_tensor

    qtype = GGMLQuantizationType(t.qtype)
    row_bytes = t.raw.size // t.shape[0]
    raw = t.raw[start * row_bytes : stop * row_bytes]
    return qtype, as_uint8_tensor(raw).reshape(-1, GGML_QUANT_SIZES[qtype][1])


def _exact_int4(t: WeightTensor, start: int, stop: int) -> Int4Codes:
    """Rows start:stop of a Q4_0 / Q4_1 / Q4_K tensor map onto int4 group-32 exactly: read codes
    and (a, b) from the bytes."""
    from ember.models.quants.int4 import EXACT_AFFINE

    qtype, blocks = _gguf_blocks(t, start, stop)
    with naming(t.name):
        q, a, b = EXACT_AFFINE[qtype](blocks)
    groups = a.reshape(-1, 1) * q.reshape(-1, INT4_GROUP).float() + b.reshape(-1, 1)
    return _codes(
        groups, a.reshape(-1, 1).float(), b.reshape(-1, 1).float(), stop - start, t.shape[1]
    )


def _exact_int8g(t: WeightTensor, start: int, stop: int) -> Int4Codes:
    """Rows start:stop of a quantized GGUF tensor as int8g (both planes side by side): exact for
    Q5_0/Q5_1/Q5_K/Q8_0 up to the scales' rounding, a two-step residual fit otherwise."""
    from ember.models.quants.dequant import DEQUANTIZERS
    from ember.models.quants.int4 import int4x2_groups

    qtype, blocks = _gguf_blocks(t, start, stop)
    with naming(t.name):  # MXFP4: a block's bad scale says which tensor
        hi, lo = int4x2_groups(qtype, blocks, DEQUANTIZERS[qtype], torch.float32)
    rows, groups = stop - start, t.shape[1] // INT4_GROUP

    def codes(part: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> Int4Codes:
        q, scale, zero = part
        return Int4Codes(
            q.reshape(rows, -1), scale.reshape(rows, groups), zero.reshape(rows, groups)
        )

    return _merge_k(codes(lo), codes(hi))


def _exact_int4_source(t: WeightTensor) -> bool:
    from gguf import GGMLQuantizationType

    from ember.models.quants.int4 import EXACT_AFFINE

    return t.raw is not None and GGMLQuantizationType(t.qtype) in EXACT_AFFINE


def _quantized_source(t: WeightTensor) -> bool:
    return t.raw is not None and t.qtype not in FLOAT_TYPES


def _permute_codes(c: Int4Codes, fix: RowFix) -> Int4Codes:
    return Int4Codes(fix(c.q), fix(c.scale), fix(c.zero))


def _merge_k(low: Int4Codes, high: Int4Codes) -> Int4Codes:
    """Two planes side by side along the input dim: [x, x] @ [low | high]^T = x @ (low + high)^T."""
    return Int4Codes(
        *(torch.cat((getattr(low, f), getattr(high, f)), 1) for f in ("q", "scale", "zero"))
    )


def _min_max_int8g(w: torch.Tensor) -> Int4Codes:
    return _merge_k(*quantize_int8g(w))


CHUNK_ROWS = 8192  # rows converted at a time (a multiple of 64: CPU int4 packs concatenate)

ExactFn = Callable[[WeightTensor, int, int], Int4Codes]  # rows start:stop straight from the bytes
FloatFn = Callable[[torch.Tensor], Int4Codes]  # from float weights


def _float_chunks(parts: list[WeightTensor], fixes: list[RowFix | None]) -> Iterator[torch.Tensor]:
    """float32 row chunks of the fused weight (a permuted part comes whole)."""
    for p, fix in zip(parts, fixes, strict=True):
        if fix is not None:
            yield fix(p.to_float())
        else:
            yield from p.row_chunks(CHUNK_ROWS)


def _code_chunks(
    parts: list[WeightTensor],
    fixes: list[RowFix | None],
    readable: Callable[[WeightTensor], bool],
    exact: ExactFn,
    from_float: FloatFn,
) -> Iterator[Int4Codes]:
    """Codes of the fused weight chunk by chunk: read from the bytes where `readable`, else
    converted from float chunks (a permuted part comes whole)."""
    for p, fix in zip(parts, fixes, strict=True):
        n = p.shape[0]
        if not readable(p):
            yield from (from_float(w) for w in _float_chunks([p], [fix]))
        elif fix is not None:
            yield _permute_codes(exact(p, 0, n), fix)
        else:
            yield from (exact(p, s, min(n, s + CHUNK_ROWS)) for s in range(0, n, CHUNK_ROWS))


def _pack_stream(
    chunks: Iterator[Int4Codes], dtype: torch.dtype, device: torch.device
) -> Int4Weight:
    """Pack the fused weight. On CPU, packs of 64-row multiples concatenate, so each such chunk is
    packed as it comes and its int32 codes dropped (peak memory: one chunk, not the matrix); from
    the first other chunk on (tiny models, or CUDA), codes are fused and packed at the end."""
    packed: list[Int4Weight] = []
    pending: list[Int4Codes] = []
    for c in chunks:
        if device.type == "cpu" and not pending and c.q.shape[0] % 64 == 0:
            packed.append(c.pack(dtype, device))
        else:
            pending.append(c)
    if pending:
        fields = ("q", "scale", "zero")
        packed.append(
            Int4Codes(*(torch.cat([getattr(c, f) for c in pending]) for f in fields)).pack(
                dtype, device
            )
        )
    if len(packed) == 1:
        return packed[0]
    return Int4Weight(
        torch.cat([p.packed for p in packed]),
        torch.cat([p.scales_zeros for p in packed], dim=1),
        sum(p.out_features for p in packed),
        packed[0].in_features,
    )


def build_linear(
    parts: list[WeightTensor],
    fixes: list[RowFix | None],
    bias: torch.Tensor | None,
    fmt: str,
    dtype: torch.dtype,
    device: torch.device,
    cached: dict[str, object] | None = None,
) -> QLinear:
    """Fuse parts (each (out_i, in)) into one QLinear of format fmt on device (or take the
    converted weight from `cached`, a QLinear.state() of an earlier build)."""
    in_f = parts[0].shape[1]
    out_f = sum(p.shape[0] for p in parts)
    if fmt in ("int4", "int8g") and in_f % INT4_GROUP:
        fmt = "int8"

    def dense_fn() -> torch.Tensor:
        return torch.cat(list(_float_chunks(parts, fixes)))

    # GGUF on the CPU: prefill can re-read the file instead of unpacking (an accelerator keeps
    # its packed weights: a host-side dequantization per prefill would cost more than it saves)
    from_file = parts[0].raw is not None and device.type == "cpu"
    b = bias.to(device) if bias is not None else None
    if cached is not None:
        prefill_fn = dense_fn if from_file and cached["fmt"] in ("int4", "int8g") else None
        return QLinear.from_state(cached, out_f, in_f, b, dtype, prefill_fn)
    if fmt == "dense":
        return QLinear(
            out_f, in_f, b, dtype, dense=dense_fn().to(device=device, dtype=dtype).contiguous()
        )
    if fmt == "int8":
        return QLinear(out_f, in_f, b, dtype, q8=_to(quantize_int8(dense_fn(), dtype), device))
    if fmt == "int4":
        chunks = _code_chunks(parts, fixes, _exact_int4_source, _exact_int4, _fitted_int4)
    elif fmt == "int8g":
        chunks = _code_chunks(parts, fixes, _quantized_source, _exact_int8g, _min_max_int8g)
    else:
        raise ValueError(f"weight format {fmt!r} is not one of dense, int8, int4, int8g")
    packed = _pack_stream(chunks, dtype, device)
    return QLinear(
        out_f, in_f, b, dtype, q4=packed, fmt=fmt, dense_fn=dense_fn if from_file else None
    )


def _to(w: Int8Weight, device: torch.device) -> Int8Weight:
    w.q, w.scales = w.q.to(device), w.scales.to(device)
    return w
