"""Bounded safetensors header validation, before safe_open ever maps the file.

Public API:
    read_safetensors_header(path) -> dict[str, SafetensorsEntry]     ModelFileError on any fault
    SafetensorsEntry                                                 name, dtype, shape, byte span
    DTYPE_BYTES                                                      known dtypes -> item size

Layout: u64 little-endian header length N | N bytes of JSON | data. The JSON maps each tensor name
to {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the data start), plus an
optional "__metadata__" object of strings.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ember.models.errors import ModelFileError
from ember.models.files.fields import describe, parse_json
from ember.models.files.pickles import refuse_pickle

MAX_HEADER_BYTES = 100 * 1024 * 1024  # the safetensors library's own cap
DTYPE_BYTES: dict[str, int] = {
    "BOOL": 1,
    "U8": 1,
    "I8": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "I16": 2,
    "U16": 2,
    "F16": 2,
    "BF16": 2,
    "I32": 4,
    "U32": 4,
    "F32": 4,
    "I64": 8,
    "U64": 8,
    "F64": 8,
}


@dataclass(frozen=True)
class SafetensorsEntry:
    """One tensor of one shard: dtype, shape and its absolute byte range in the file."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    start: int  # absolute file offset
    end: int
    shard: Path

    @property
    def nbytes(self) -> int:
        """Bytes of tensor data."""
        return self.end - self.start

    @property
    def n_elements(self) -> int:
        """Number of elements (1 for a scalar)."""
        return math.prod(self.shape)


def _read_json_header(path: Path) -> tuple[Any, int, int]:
    """(parsed JSON, data start, file size)."""
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            prefix = f.read(8)
            if len(prefix) < 8:
                raise ModelFileError(f"{path.name}: truncated: {size} bytes, no header length")
            (length,) = struct.unpack("<Q", prefix)
            if length > size - 8 or length > MAX_HEADER_BYTES:
                raise ModelFileError(
                    f"{path.name}: header length {length} exceeds the file ({size} bytes) "
                    f"or the {MAX_HEADER_BYTES}-byte cap"
                )
            text = f.read(length)
    except FileNotFoundError:
        raise ModelFileError(f"{path.name}: missing shard file") from None
    except OSError as exc:
        raise ModelFileError(f"{path.name}: cannot read: {exc}") from None
    return parse_json(text, f"{path.name}: header", MAX_HEADER_BYTES), 8 + length, size


def _entry(path: Path, name: str, raw: Any, data_start: int, size: int) -> SafetensorsEntry:
    where = f"{path.name}: tensor {name}"
    if not isinstance(raw, dict):
        raise ModelFileError(f"{where}: entry is not an object")
    dtype, shape, offsets = raw.get("dtype"), raw.get("shape"), raw.get("data_offsets")
    if not isinstance(dtype, str) or dtype not in DTYPE_BYTES:
        raise ModelFileError(f"{where}: dtype: unknown dtype {describe(dtype)}")
    if not isinstance(shape, list) or not all(
        isinstance(d, int) and not isinstance(d, bool) and 0 <= d < 1 << 63 for d in shape
    ):
        raise ModelFileError(f"{where}: shape: {describe(shape)} is not a list of sizes")
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)
        or not 0 <= offsets[0] <= offsets[1]
    ):
        raise ModelFileError(f"{where}: data_offsets: bad value {describe(offsets)}")
    begin, end = data_start + offsets[0], data_start + offsets[1]
    if end > size:
        raise ModelFileError(
            f"{path.name}: truncated: tensor {name} ends at byte {end}, file has {size}"
        )
    expected = math.prod(shape) * DTYPE_BYTES[dtype]
    if end - begin != expected:
        raise ModelFileError(
            f"{where}: {end - begin} bytes for shape {tuple(shape)} {dtype} ({expected} expected)"
        )
    return SafetensorsEntry(name, dtype, tuple(shape), begin, end, path)


def read_safetensors_header(path: Path) -> dict[str, SafetensorsEntry]:
    """Validate one .safetensors file's header against its size; name -> entry.
    A pickle checkpoint under a .safetensors name (a torch zip) is refused as one."""
    refuse_pickle(path)
    header, data_start, size = _read_json_header(path)
    if not isinstance(header, dict):
        raise ModelFileError(f"{path.name}: header is not a JSON object")
    meta = header.pop("__metadata__", None)
    if meta is not None and not (
        isinstance(meta, dict) and all(isinstance(v, str) for v in meta.values())
    ):
        raise ModelFileError(f"{path.name}: __metadata__ must map names to strings")
    entries = {name: _entry(path, name, raw, data_start, size) for name, raw in header.items()}
    ordered = sorted(entries.values(), key=lambda e: (e.start, e.end))
    for prev, cur in zip(ordered, ordered[1:], strict=False):
        if cur.start < prev.end:
            raise ModelFileError(
                f"{path.name}: tensors {prev.name} and {cur.name} overlap "
                f"(bytes {prev.start}..{prev.end} and {cur.start}..{cur.end})"
            )
    return entries
