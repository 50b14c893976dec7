"""The tensor-info section of a GGUF header: names, dims, types and offsets, all bounded.

Public API:
    TensorInfo                                   one validated entry (ne in ggml order)
    read_tensor_infos(cur, n_tensors, alignment) -> (list[TensorInfo], data offset)

Called by gguf_header.parse_gguf_header with its cursor, once the metadata is read: every count
and size is checked against the bytes left and against int64 before anything is allocated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MAX_NAME_BYTES = 63  # GGML_MAX_NAME is 64 including the terminating NUL
MAX_DIMS = 4
_INT64_MAX = (1 << 63) - 1
_MIN_TENSOR_BYTES = 8 + 1 + 4 + 8 + 4 + 8  # name length, 1-byte name, n_dims, one ne, type, offset


@dataclass(frozen=True)
class TensorInfo:
    """One tensor's header entry, validated: ne in ggml order (innermost first)."""

    name: str
    ne: tuple[int, ...]
    qtype: int
    offset: int  # absolute byte offset in the file
    nbytes: int
    n_elements: int


def _read_tensor_info(cur: Any, index: int) -> tuple[str, tuple[int, ...], int, int]:
    name = cur.string(f"tensor {index} name", MAX_NAME_BYTES)
    if not name:
        raise cur.fail(f"tensor {index} has an empty name")
    n_dims = cur.u32(f"tensor {name} n_dims")
    if not 1 <= n_dims <= MAX_DIMS:
        raise cur.fail(f"tensor {name}: {n_dims} dimensions, expected 1..{MAX_DIMS}")
    ne = tuple(cur.u64(f"tensor {name} dim {d}") for d in range(n_dims))
    qtype = cur.u32(f"tensor {name} type")
    offset = cur.u64(f"tensor {name} offset")
    return name, ne, qtype, offset


def _tensor_bytes(cur: Any, name: str, ne: tuple[int, ...], qtype: int) -> tuple[int, int]:
    """(n_elements, nbytes) with overflow and block-size checks."""
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    try:
        block, type_size = GGML_QUANT_SIZES[GGMLQuantizationType(qtype)]
    except (ValueError, KeyError):
        raise cur.fail(f"tensor {name}: unknown tensor type {qtype}") from None
    n_elements = 1
    for dim in ne:
        if dim == 0:
            raise cur.fail(f"tensor {name}: zero dimension in {list(ne)}")
        n_elements *= dim
        if n_elements > _INT64_MAX:
            raise cur.fail(f"tensor {name}: element count overflows int64 ({list(ne)})")
    if ne[0] % block:
        qname = GGMLQuantizationType(qtype).name
        raise cur.fail(
            f"tensor {name}: first dimension {ne[0]} is not a multiple of {qname} block {block}"
        )
    nbytes = n_elements // block * type_size
    if nbytes > _INT64_MAX:
        raise cur.fail(f"tensor {name}: byte size overflows int64")
    return n_elements, nbytes


def read_tensor_infos(cur: Any, n_tensors: int, alignment: int) -> tuple[list[TensorInfo], int]:
    """The tensor entries after the metadata, laid out from the aligned data offset."""
    left = cur.size - cur.pos
    if n_tensors > left // _MIN_TENSOR_BYTES:
        raise cur.fail(f"truncated: {n_tensors} tensors declared, only {left} bytes left")
    raw = [_read_tensor_info(cur, i) for i in range(n_tensors)]
    data_offset = -(-cur.pos // alignment) * alignment
    tensors = _layout_tensors(cur, raw, alignment, data_offset)
    _check_tail(cur, tensors, data_offset, alignment)
    return tensors, data_offset


def _check_tail(cur: Any, tensors: list[TensorInfo], data_offset: int, alignment: int) -> None:
    """Refuse bytes past the last tensor (beyond its alignment padding): they are no part of
    the model, and a digest of the file would hash them (a 64 GiB sparse tail took minutes)."""
    end = max((t.offset + t.nbytes for t in tensors), default=data_offset)
    tail = cur.size - end
    if tail >= alignment and tail > 0:
        raise cur.fail(
            f"{tail:,} bytes after the last tensor (which ends at byte {end:,}): not part of a "
            "GGUF model (a damaged or appended-to file?)"
        )


def _layout_tensors(
    cur: Any, raw: list[tuple[str, tuple[int, ...], int, int]], alignment: int, data_offset: int
) -> list[TensorInfo]:
    seen: set[str] = set()
    tensors: list[TensorInfo] = []
    prev_end, prev_name = 0, ""
    for name, ne, qtype, rel in raw:
        if name in seen:
            raise cur.fail(f"duplicate tensor name {name}")
        seen.add(name)
        n_elements, nbytes = _tensor_bytes(cur, name, ne, qtype)
        if rel % alignment:
            raise cur.fail(f"tensor {name}: offset {rel} is not aligned to {alignment}")
        if rel < prev_end:
            raise cur.fail(
                f"tensor {name}: offset {rel} overlaps or precedes {prev_name} (ends at {prev_end})"
            )
        end = data_offset + rel + nbytes
        if end > cur.size:
            raise cur.fail(f"truncated: tensor {name} ends at byte {end}, file has {cur.size}")
        tensors.append(TensorInfo(name, ne, qtype, data_offset + rel, nbytes, n_elements))
        prev_end, prev_name = rel + nbytes, name
    return tensors
