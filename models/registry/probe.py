"""What a local path holds, cheaply: its format, size, architecture and (cached) SHA-256.

Full validation is models/files/inspect.py's job; this only reads what the registry needs to name and
find a model without parsing whole vocabularies (a GGUF header's scalars, a config.json).
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
from pathlib import Path
from typing import BinaryIO

from ember.models.errors import RegistryError

SPLIT_GGUF = re.compile(r"^(?P<stem>.+)-(?P<index>\d{5})-of-(?P<count>\d{5})\.gguf$")
_MAX_KVS_SCANNED = 256
_MAX_STRING_BYTES = 1 << 20
# GGUF value types -> struct format of a scalar (8 = string, 9 = array handled apart).
_SCALARS = {
    0: "B",
    1: "b",
    2: "H",
    3: "h",
    4: "I",
    5: "i",
    6: "f",
    7: "?",
    10: "Q",
    11: "q",
    12: "d",
}


def detect_format(path: Path) -> str:
    """'gguf' for a .gguf file, 'safetensors' for a folder with config.json and shards."""
    if path.is_file() and path.suffix.lower() == ".gguf":
        return "gguf"
    if path.is_dir() and (path / "config.json").is_file() and any(path.glob("*.safetensors")):
        return "safetensors"
    if (
        path.is_file()
        and path.suffix.lower() == ".safetensors"
        and (path.parent / "config.json").is_file()
    ):
        return "safetensors"
    raise RegistryError(
        f"{path}: not a model (expected a .gguf file or a folder with config.json and .safetensors files)"
    )


def gguf_shards(path: Path) -> list[Path]:
    """All files of a (possibly split) GGUF, given any one of them, in order."""
    match = SPLIT_GGUF.match(path.name)
    if not match:
        return [path]
    count = int(match["count"])
    stem = match["stem"]
    return [path.with_name(f"{stem}-{i:05d}-of-{count:05d}.gguf") for i in range(1, count + 1)]


def model_files(path: Path, fmt: str) -> list[Path]:
    """The files that make up the model at path (existing ones only)."""
    if fmt == "gguf":
        return [p for p in gguf_shards(path) if p.exists()]
    folder = path if path.is_dir() else path.parent
    return sorted(p for p in folder.iterdir() if p.is_file())


def model_size(path: Path, fmt: str) -> int:
    """Bytes on disk of the model's files."""
    return sum(p.stat().st_size for p in model_files(path, fmt))


def default_name(path: Path, fmt: str) -> str:
    """A registry name for a path: the GGUF file stem (without -0000N-of-0000M) or the folder name."""
    if fmt == "gguf":
        match = SPLIT_GGUF.match(path.name)
        return match["stem"] if match else path.stem
    return (path if path.is_dir() else path.parent).name


def _read_exact(f: BinaryIO, count: int) -> bytes:
    data = f.read(count)
    if len(data) != count:
        raise ValueError("truncated header")
    return data


def _read_value(f: BinaryIO, vtype: int) -> object:
    if vtype in _SCALARS:
        fmt = "<" + _SCALARS[vtype]
        return struct.unpack(fmt, _read_exact(f, struct.calcsize(fmt)))[0]
    if vtype == 8:
        (length,) = struct.unpack("<Q", _read_exact(f, 8))
        if length > _MAX_STRING_BYTES:
            raise ValueError("string too long")
        return _read_exact(f, length).decode("utf-8", "replace")
    if vtype == 9:  # array: skip it, the registry needs no arrays
        item_type, count = struct.unpack("<IQ", _read_exact(f, 12))
        if item_type in _SCALARS:
            f.seek(count * struct.calcsize("<" + _SCALARS[item_type]), 1)
        elif item_type == 8:
            for _ in range(count):
                (length,) = struct.unpack("<Q", _read_exact(f, 8))
                f.seek(length, 1)
        else:
            raise ValueError("nested array")
        return None
    raise ValueError(f"unknown value type {vtype}")


def gguf_scalars(path: Path) -> dict[str, object]:
    """The scalar key/values of a GGUF header (arrays skipped); {} if it is not readable."""
    try:
        with path.open("rb") as f:
            return scan_gguf_scalars(f)
    except OSError:
        return {}


def scan_gguf_scalars(f: BinaryIO) -> dict[str, object]:
    """Scalar key/values from a GGUF header stream; stops quietly where the bytes end."""
    out: dict[str, object] = {}
    try:
        magic, _version, _tensors, kv_count = struct.unpack("<4sIQQ", _read_exact(f, 24))
        if magic != b"GGUF":
            return {}
        for _ in range(min(kv_count, _MAX_KVS_SCANNED)):
            (key_len,) = struct.unpack("<Q", _read_exact(f, 8))
            if key_len > 65536:
                break
            key = _read_exact(f, key_len).decode("utf-8", "replace")
            (vtype,) = struct.unpack("<I", _read_exact(f, 4))
            value = _read_value(f, vtype)
            if value is not None:
                out[key] = value
    except (OSError, ValueError, struct.error):
        return out
    return out


def peek_architecture(path: Path, fmt: str) -> str | None:
    """The architecture name from the GGUF header or config.json, or None when unknown."""
    if fmt == "gguf":
        arch = gguf_scalars(path).get("general.architecture")
        return str(arch) if arch else None
    folder = path if path.is_dir() else path.parent
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    model_type = config.get("model_type") if isinstance(config, dict) else None
    return str(model_type) if model_type else None


def sha256_file(path: Path, block_bytes: int = 1 << 22) -> str:
    """Hex SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(block_bytes):
            digest.update(block)
    return digest.hexdigest()
