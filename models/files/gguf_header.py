"""Bounded GGUF header parser and validator, in plain Python integers over a read-only buffer.

Public API:
    parse_gguf_header(buf, name) -> GGUFHeader      raises ModelFileError("<name>: <reason>")
    parse_gguf_metadata(buf, name, partial=False)   the key/values only; partial: buf may be the
                                                    file's first bytes (a Hub range request), and
                                                    reading stops at the last complete entry
    GGUFHeader, ArrayRef, TensorInfo (gguf_tensor_info.py)   what it found
    read_array(buf, ref) -> list | numpy.ndarray    a large metadata array, decoded on demand

Every length and count read from the file is checked against the bytes left before anything is
allocated or skipped, so a file that declares a 2**60-byte string costs nothing but an error.
Layout (GGUF v2/v3, little-endian):
    magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv
    n_kv x (string key | u32 type | value)         string = u64 length + UTF-8 bytes
    n_tensors x (string name | u32 n_dims | n_dims x u64 ne | u32 ggml type | u64 offset)
    padding to general.alignment | tensor data (offsets relative to here)
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from ember.models.errors import ModelFileError
from ember.models.files.gguf_tensor_info import TensorInfo, read_tensor_infos

MAX_ALIGNMENT = 1 << 16
DEFAULT_ALIGNMENT = 32
MAX_KEY_BYTES = 65535
SMALL_ARRAY = 1024  # arrays up to this many items are decoded into the metadata dict

T_UINT8, T_INT8, T_UINT16, T_INT16, T_UINT32, T_INT32, T_FLOAT32, T_BOOL = range(8)
T_STRING, T_ARRAY, T_UINT64, T_INT64, T_FLOAT64 = range(8, 13)
# value type -> (struct format, size in bytes, numpy dtype) for the fixed-size types
_SCALAR: dict[int, tuple[str, int, str]] = {
    T_UINT8: ("<B", 1, "<u1"),
    T_INT8: ("<b", 1, "<i1"),
    T_UINT16: ("<H", 2, "<u2"),
    T_INT16: ("<h", 2, "<i2"),
    T_UINT32: ("<I", 4, "<u4"),
    T_INT32: ("<i", 4, "<i4"),
    T_FLOAT32: ("<f", 4, "<f4"),
    T_BOOL: ("<B", 1, "<u1"),
    T_UINT64: ("<Q", 8, "<u8"),
    T_INT64: ("<q", 8, "<i8"),
    T_FLOAT64: ("<d", 8, "<f8"),
}
_U64 = struct.Struct("<Q")
_MIN_KV_BYTES = 8 + 1 + 4 + 1  # key length, 1-byte key, type, smallest value


@dataclass(frozen=True)
class ArrayRef:
    """A metadata array left in the file: element type, count and byte range."""

    key: str
    elem_type: int
    count: int
    offset: int  # byte offset of the first element
    end: int


@dataclass(frozen=True)
class GGUFHeader:
    """Everything the header says, after every bound was checked."""

    version: int
    metadata: dict[str, Any]  # scalars and small arrays
    arrays: dict[str, ArrayRef]  # arrays with more than SMALL_ARRAY items
    tensors: list[TensorInfo]
    alignment: int
    data_offset: int
    file_size: int


class _Truncated(ModelFileError):
    """The bytes end inside a structure (a whole file: an error; a prefix: where to stop)."""


class _Cursor:
    """Reads little-endian values from buf, failing with one line when the file runs out."""

    def __init__(self, buf: Any, name: str) -> None:
        self.buf = buf
        self.size = len(buf)
        self.pos = 0
        self.name = name

    def fail(self, reason: str) -> ModelFileError:
        return ModelFileError(f"{self.name}: {reason}")

    def need(self, nbytes: int, what: str) -> None:
        if nbytes > self.size - self.pos:
            raise _Truncated(
                f"{self.name}: truncated: {what} needs {nbytes} bytes at offset {self.pos}, "
                f"file has {self.size}"
            )

    def scalar(self, vtype: int, what: str) -> Any:
        fmt, width, _ = _SCALAR[vtype]
        self.need(width, what)
        (value,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += width
        if vtype == T_BOOL:
            if value > 1:
                raise self.fail(f"{what}: bool value {value} is neither 0 nor 1")
            return bool(value)
        return value

    def u32(self, what: str) -> int:
        return int(self.scalar(T_UINT32, what))

    def u64(self, what: str) -> int:
        return int(self.scalar(T_UINT64, what))

    def string_span(self, what: str, limit: int | None = None) -> tuple[int, int]:
        length = self.u64(f"{what} length")
        if limit is not None and length > limit:
            raise self.fail(
                f"{what} at offset {self.pos - 8}: length {length} exceeds the limit of {limit} bytes"
            )
        self.need(length, what)
        start = self.pos
        self.pos += length
        return start, length

    def string(self, what: str, limit: int | None = None) -> str:
        start, length = self.string_span(what, limit)
        try:
            return bytes(self.buf[start : start + length]).decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"{what}: not valid UTF-8") from None


def _value_type(cur: _Cursor, what: str) -> int:
    vtype = cur.u32(f"{what} type")
    if vtype > T_FLOAT64:
        raise cur.fail(f"{what}: unknown value type {vtype}")
    return vtype


def _read_array(cur: _Cursor, key: str) -> list[Any] | ArrayRef:
    what = f"metadata {key}"
    elem = _value_type(cur, f"{what} element")
    if elem == T_ARRAY:
        raise cur.fail(f"{what}: nested arrays are not allowed")
    count = cur.u64(f"{what} count")
    min_width = 8 if elem == T_STRING else _SCALAR[elem][1]
    if count > (cur.size - cur.pos) // min_width:
        raise _Truncated(
            f"{cur.name}: truncated: {what} declares {count} items, "
            f"only {cur.size - cur.pos} bytes left"
        )
    start = cur.pos
    if count <= SMALL_ARRAY:
        if elem == T_STRING:
            return [cur.string(f"{what}[{i}]") for i in range(count)]
        return [cur.scalar(elem, f"{what}[{i}]") for i in range(count)]
    if elem == T_STRING:
        _skip_strings(cur, what, count)
    else:
        cur.pos += count * min_width  # fits: checked against the bytes left above
    return ArrayRef(key=key, elem_type=elem, count=count, offset=start, end=cur.pos)


def _skip_strings(cur: _Cursor, what: str, count: int) -> None:
    """Walk `count` strings (a tight loop: vocabularies hold 100k-260k of them)."""
    unpack, buf, size, pos = _U64.unpack_from, cur.buf, cur.size, cur.pos
    for i in range(count):
        if pos + 8 > size or (length := unpack(buf, pos)[0]) > size - pos - 8:
            cur.pos = pos
            cur.string_span(f"{what}[{i}]")  # raises the precise truncation error
        pos += 8 + length
    cur.pos = pos


def _read_kv(cur: _Cursor, header_md: dict[str, Any], arrays: dict[str, ArrayRef]) -> None:
    key = cur.string("metadata key", MAX_KEY_BYTES)
    if not key:
        raise cur.fail(f"empty metadata key at offset {cur.pos}")
    if key in header_md or key in arrays:
        raise cur.fail(f"duplicate metadata key {key}")
    vtype = _value_type(cur, f"metadata {key}")
    if vtype == T_ARRAY:
        value = _read_array(cur, key)
        if isinstance(value, ArrayRef):
            arrays[key] = value
            return
        header_md[key] = value
    elif vtype == T_STRING:
        header_md[key] = cur.string(f"metadata {key}")
    else:
        header_md[key] = cur.scalar(vtype, f"metadata {key}")


def _alignment(cur: _Cursor, md: dict[str, Any]) -> int:
    value = md.get("general.alignment", DEFAULT_ALIGNMENT)
    if isinstance(value, bool) or not isinstance(value, int):
        raise cur.fail(f"general.alignment must be an integer, got {value!r}")
    if value <= 0 or value & (value - 1) or value > MAX_ALIGNMENT:
        raise cur.fail(f"general.alignment {value} is not a power of two <= {MAX_ALIGNMENT}")
    return value


def _check_version(cur: _Cursor) -> int:
    cur.need(4, "magic")
    magic = bytes(cur.buf[0:4])
    if magic != b"GGUF":
        raise cur.fail(f"not a GGUF file (magic {magic!r})")
    cur.pos = 4
    version = cur.u32("version")
    if version not in (2, 3):
        extra = " (big-endian file?)" if version >= 1 << 16 else ""
        raise cur.fail(f"unsupported GGUF version {version}{extra}; expected 2 or 3")
    return version


def _read_metadata(
    cur: _Cursor, partial: bool
) -> tuple[int, int, dict[str, Any], dict[str, ArrayRef]]:
    """(version, tensor count, metadata, large arrays) from the start of the file."""
    version = _check_version(cur)
    n_tensors = cur.u64("tensor count")
    n_kv = cur.u64("metadata count")
    left = cur.size - cur.pos
    if n_kv > left // _MIN_KV_BYTES and not partial:
        raise cur.fail(f"truncated: {n_kv} metadata entries declared, only {left} bytes left")
    md: dict[str, Any] = {}
    arrays: dict[str, ArrayRef] = {}
    for _ in range(n_kv):
        try:
            _read_kv(cur, md, arrays)
        except _Truncated:
            if not partial:
                raise
            break
    return version, n_tensors, md, arrays


def parse_gguf_metadata(buf: Any, name: str, partial: bool = False) -> dict[str, Any]:
    """The metadata key/values (large arrays left out) of a GGUF file or, with partial, of
    its first bytes: entries cut off by the end of buf are dropped, every other fault raises."""
    return _read_metadata(_Cursor(buf, name), partial)[2]


def parse_gguf_header(buf: Any, name: str) -> GGUFHeader:
    """Parse and validate a GGUF header held in buf (bytes or mmap); ModelFileError on any fault."""
    cur = _Cursor(buf, name)
    version, n_tensors, md, arrays = _read_metadata(cur, partial=False)
    alignment = _alignment(cur, md)
    tensors, data_offset = read_tensor_infos(cur, n_tensors, alignment)
    return GGUFHeader(version, md, arrays, tensors, alignment, data_offset, cur.size)


def read_array(buf: Any, ref: ArrayRef, name: str) -> Any:
    """Decode a large metadata array: list[str] for strings, else a read-only numpy view."""
    import numpy as np

    if ref.elem_type != T_STRING:
        return np.frombuffer(
            buf, dtype=_SCALAR[ref.elem_type][2], count=ref.count, offset=ref.offset
        )
    out: list[str] = []
    unpack, pos = _U64.unpack_from, ref.offset
    try:
        for _ in range(ref.count):  # bounds were checked when the header was parsed
            length = unpack(buf, pos)[0]
            out.append(str(buf[pos + 8 : pos + 8 + length], "utf-8"))
            pos += 8 + length
    except UnicodeDecodeError:
        raise ModelFileError(f"{name}: metadata {ref.key}[{len(out)}] is not valid UTF-8") from None
    return out
