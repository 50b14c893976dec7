"""Build a QLinear from one or more file tensors (fused along the output dim) in a chosen format."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch

from ember.engine.runners.torch.layers.linear import QLinear
from ember.engine.runners.torch.layers.pack import (
    INT4_GROUP,
    Int4Codes,
    Int4Weight,
    quantize_int8,
    quantize_int8g,
)
from ember.engine.runners.torch.weights import WeightTensor

RowFix = Callable[[torch.Tensor], torch.Tensor]  # a row permutation (llama GGUF Q/K), or identity


def _fitted_int4(w: torch.Tensor) -> Int4Codes:
    """Least-squares int4 grid per group of 32 (models.quants_int4's fit) from float weights."""
    from ember.models.quants_int4 import fit_affine

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


def _exact_int4(t: WeightTensor) -> Int4Codes | None:
    """Q4_0 / Q4_1 / Q4_K map onto int4 group-32 exactly: read codes and (a, b) from the bytes."""
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    from ember.models.quants import as_uint8_tensor
    from ember.models.quants_int4 import EXACT_AFFINE

    if t.raw is None or GGMLQuantizationType(t.qtype) not in EXACT_AFFINE:
        return None
    qtype = GGMLQuantizationType(t.qtype)
    blocks = as_uint8_tensor(t.raw).reshape(-1, GGML_QUANT_SIZES[qtype][1])
    q, a, b = EXACT_AFFINE[qtype](blocks)
    n, k = t.shape
    groups = a.reshape(-1, 1) * q.reshape(-1, INT4_GROUP).float() + b.reshape(-1, 1)
    return _codes(groups, a.reshape(-1, 1).float(), b.reshape(-1, 1).float(), n, k)


def _permute_codes(c: Int4Codes, fix: RowFix) -> Int4Codes:
    return Int4Codes(fix(c.q), fix(c.scale), fix(c.zero))


CHUNK_ROWS = 8192  # rows converted at a time (a multiple of 64: CPU int4 packs concatenate)


def _float_chunks(parts: list[WeightTensor], fixes: list[RowFix | None]) -> Iterator[torch.Tensor]:
    """float32 row chunks of the fused weight (a permuted part comes whole)."""
    for p, fix in zip(parts, fixes, strict=True):
        if fix is not None:
            yield fix(p.to_float())
        else:
            yield from p.row_chunks(CHUNK_ROWS)


def _pack_planes(
    chunks: list[list[Int4Codes]], dtype: torch.dtype, device: torch.device
) -> list[Int4Weight]:
    """Per plane, pack its code chunks (concatenating packed chunks where the layout allows)."""
    planes = []
    for plane in zip(*chunks, strict=True):
        n = sum(c.q.shape[0] for c in plane)
        k = plane[0].q.shape[1]
        if device.type == "cpu" and all(c.q.shape[0] % 64 == 0 for c in plane[:-1]):
            packed = [c.pack(dtype, device) for c in plane]
            planes.append(
                Int4Weight(
                    torch.cat([p.packed for p in packed]),
                    torch.cat([p.scales_zeros for p in packed], dim=1),
                    n,
                    k,
                )
            )
        else:
            fused = Int4Codes(
                *(torch.cat([getattr(c, f) for c in plane]) for f in ("q", "scale", "zero"))
            )
            planes.append(fused.pack(dtype, device))
    return planes


def build_linear(
    parts: list[WeightTensor],
    fixes: list[RowFix | None],
    bias: torch.Tensor | None,
    fmt: str,
    dtype: torch.dtype,
    device: torch.device,
) -> QLinear:
    """Fuse parts (each (out_i, in)) into one QLinear of format fmt on device."""
    in_f = parts[0].shape[1]
    out_f = sum(p.shape[0] for p in parts)
    if fmt in ("int4", "int8g") and in_f % INT4_GROUP:
        fmt = "int8"

    def dense_fn() -> torch.Tensor:
        return torch.cat(list(_float_chunks(parts, fixes)))

    from_file = parts[0].raw is not None  # GGUF: prefill can re-read the file instead of unpacking
    b = bias.to(device) if bias is not None else None
    if fmt == "dense":
        return QLinear(
            out_f, in_f, b, dtype, dense=dense_fn().to(device=device, dtype=dtype).contiguous()
        )
    if fmt == "int8":
        return QLinear(out_f, in_f, b, dtype, q8=_to(quantize_int8(dense_fn(), dtype), device))
    chunks: list[list[Int4Codes]] = []
    if fmt == "int4":
        for p, fix in zip(parts, fixes, strict=True):
            exact = _exact_int4(p)
            if exact is not None:
                chunks.append([_permute_codes(exact, fix) if fix is not None else exact])
            else:
                chunks.extend([_fitted_int4(w)] for w in _float_chunks([p], [fix]))
    elif fmt == "int8g":
        chunks = [list(quantize_int8g(w)) for w in _float_chunks(parts, fixes)]
    else:
        raise ValueError(f"weight format {fmt!r} is not one of dense, int8, int4, int8g")
    planes = _pack_planes(chunks, dtype, device)
    return QLinear(out_f, in_f, b, dtype, q4=planes, dense_fn=dense_fn if from_file else None)


def _to(w, device: torch.device):  # type: ignore[no-untyped-def]
    w.q, w.scales = w.q.to(device), w.scales.to(device)
    return w
