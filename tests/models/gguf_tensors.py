"""A minimal GGUF tensor index for the quant tests: gguf.GGUFReader parses the 262k-entry
vocabulary into numpy objects (tens of seconds on a busy 2-core box); this skips metadata values
with struct and maps each tensor's bytes zero-copy. Test-only: no validation beyond asserts."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

# GGUF value type -> fixed size in bytes (8 = string, 9 = array are variable).
_FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


@dataclass(frozen=True)
class RawTensor:
    name: str
    qtype: GGMLQuantizationType
    shape: tuple[int, ...]  # numpy order: (rows, cols), cols = ne0
    data: np.ndarray  # uint8 bytes, a view of the file's mmap


def _skip_value(buf: memoryview, pos: int, vtype: int) -> int:
    if vtype in _FIXED:
        return pos + _FIXED[vtype]
    if vtype == 8:
        (length,) = struct.unpack_from("<Q", buf, pos)
        return pos + 8 + length
    assert vtype == 9, vtype
    item_type, count = struct.unpack_from("<IQ", buf, pos)
    pos += 12
    if item_type in _FIXED:
        return pos + count * _FIXED[item_type]
    for _ in range(count):
        pos = _skip_value(buf, pos, item_type)
    return pos


def read_tensors(path: Path) -> dict[str, RawTensor]:
    """name -> RawTensor for every tensor of a GGUF v3 file."""
    mm = np.memmap(path, dtype=np.uint8, mode="r")
    buf = memoryview(mm)
    magic, version, n_tensors, n_kv = struct.unpack_from("<4sIQQ", buf, 0)
    assert magic == b"GGUF" and version == 3
    pos, alignment = 24, 32
    for _ in range(n_kv):
        (key_len,) = struct.unpack_from("<Q", buf, pos)
        key = bytes(buf[pos + 8 : pos + 8 + key_len]).decode()
        (vtype,) = struct.unpack_from("<I", buf, pos + 8 + key_len)
        pos += 12 + key_len
        if key == "general.alignment":
            (alignment,) = struct.unpack_from("<I", buf, pos)
        pos = _skip_value(buf, pos, vtype)
    infos = []
    for _ in range(n_tensors):
        (name_len,) = struct.unpack_from("<Q", buf, pos)
        name = bytes(buf[pos + 8 : pos + 8 + name_len]).decode()
        pos += 8 + name_len
        (n_dims,) = struct.unpack_from("<I", buf, pos)
        dims = struct.unpack_from(f"<{n_dims}Q", buf, pos + 4)
        qtype, offset = struct.unpack_from("<IQ", buf, pos + 4 + 8 * n_dims)
        pos += 4 + 8 * n_dims + 12
        infos.append((name, GGMLQuantizationType(qtype), dims, offset))
    data_start = -(-pos // alignment) * alignment
    out = {}
    for name, qtype, dims, offset in infos:
        block_elements, block_bytes = GGML_QUANT_SIZES[qtype]
        n_elements = int(np.prod(dims))
        start = data_start + offset
        data = mm[start : start + n_elements // block_elements * block_bytes]
        out[name] = RawTensor(name, qtype, tuple(int(d) for d in reversed(dims)), data)
    return out
