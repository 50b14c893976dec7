"""A GGUF file as an editable spec, and back to bytes: the tool the bad-file corpus is made with.

`spec_from_file` takes a file apart with the gguf package's own GGUFReader (not our parser, so
the corpus does not lean on the code it tests); `build` writes a spec back to bytes and reports
where each section starts. `build(spec_from_file(p)) == p.read_bytes()` for a valid file.
"""

from __future__ import annotations

import copy
import struct
from dataclasses import dataclass, field
from pathlib import Path

import gguf

U32, U64, STRING, ARRAY, BOOL, FLOAT32 = 4, 10, 8, 9, 7, 6


def u32(value: int) -> bytes:
    return struct.pack("<I", value)


def u64(value: int) -> bytes:
    return struct.pack("<Q", value)


def gstr(text: str | bytes) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return u64(len(raw)) + raw


def kv(key: str | bytes, vtype: int, payload: bytes) -> bytes:
    """One encoded key/value: key string, u32 type, already-encoded value."""
    return gstr(key) + u32(vtype) + payload


def kv_u32(key: str, value: int) -> bytes:
    return kv(key, U32, u32(value))


def kv_str(key: str, value: str | bytes) -> bytes:
    return kv(key, STRING, gstr(value))


def key_of(encoded_kv: bytes) -> bytes:
    (length,) = struct.unpack_from("<Q", encoded_kv, 0)
    return encoded_kv[8 : 8 + length]


@dataclass
class TensorSpec:
    name: bytes
    ne: list[int]
    qtype: int
    offset: int  # relative to the data section


@dataclass
class GGUFSpec:
    kvs: list[bytes]
    tensors: list[TensorSpec]
    data: bytes
    alignment: int = 32
    magic: bytes = b"GGUF"
    version: int = 3
    n_kv: int | None = None  # None: len(kvs)
    n_tensors: int | None = None  # None: len(tensors)
    sections: dict[str, int] = field(default_factory=dict)

    def copy(self) -> GGUFSpec:
        return copy.deepcopy(self)

    def tensor(self, name: str) -> TensorSpec:
        return next(t for t in self.tensors if t.name == name.encode())

    def drop_kv(self, key: str) -> None:
        self.kvs = [e for e in self.kvs if key_of(e) != key.encode()]

    def set_kv(self, key: str, encoded: bytes) -> None:
        self.kvs = [encoded if key_of(e) == key.encode() else e for e in self.kvs]


def build(spec: GGUFSpec) -> tuple[bytes, dict[str, int]]:
    """Serialize a spec; also return the byte offset where each section starts."""
    n_kv = len(spec.kvs) if spec.n_kv is None else spec.n_kv
    n_tensors = len(spec.tensors) if spec.n_tensors is None else spec.n_tensors
    out = bytearray(spec.magic + u32(spec.version) + u64(n_tensors) + u64(n_kv))
    sections = {"magic": 0, "version": 4, "n_tensors": 8, "n_kv": 16, "kv": len(out)}
    for i, entry in enumerate(spec.kvs):
        sections[f"kv{i}"] = len(out)
        out += entry
    sections["tensor_info"] = len(out)
    for t in spec.tensors:
        out += gstr(t.name) + u32(len(t.ne)) + b"".join(u64(d) for d in t.ne)
        out += u32(t.qtype) + u64(t.offset)
    sections["padding"] = len(out)
    out += b"\0" * (-len(out) % spec.alignment)
    sections["data"] = len(out)
    out += spec.data
    sections["end"] = len(out)
    return bytes(out), sections


def spec_from_file(path: Path) -> GGUFSpec:
    """Take a valid GGUF apart with gguf.GGUFReader."""
    raw = path.read_bytes()
    reader = gguf.GGUFReader(str(path))
    kvs = []
    for key, fld in reader.fields.items():
        if key.startswith("GGUF."):
            continue
        length = sum(int(p.nbytes) for p in fld.parts)
        kvs.append(raw[fld.offset : fld.offset + length])
    tensors = [
        TensorSpec(
            name=t.name.encode(),
            ne=[int(d) for d in t.field.parts[3]],
            qtype=int(t.tensor_type),
            offset=int(t.data_offset) - reader.data_offset,
        )
        for t in reader.tensors
    ]
    alignment = reader.alignment
    return GGUFSpec(kvs, tensors, raw[reader.data_offset :], alignment=alignment)
