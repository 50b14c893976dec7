"""What a local path holds, cheaply: its format, size, architecture and (cached) SHA-256.

Full validation is models/files/inspect.py's job; this only reads what the registry needs to name and
find a model: the GGUF metadata (models/files' bounded parser; vocabularies stay unread) or
config.json (the same typed reader as every other path).
"""

from __future__ import annotations

import hashlib
import mmap
import re
from pathlib import Path

from ember.models.errors import ModelFileError, RegistryError
from ember.models.files.fields import read_json_file
from ember.models.files.gguf_header import parse_gguf_metadata
from ember.models.files.hparams.from_hf import hf_architecture
from ember.user_files import UserFileError, check_user_file

SPLIT_GGUF = re.compile(r"^(?P<stem>.+)-(?P<index>\d{5})-of-(?P<count>\d{5})\.gguf$")


def detect_format(path: Path) -> str:
    """'gguf' for a .gguf file, 'safetensors' for a folder with config.json and shards; a
    .gguf that is a FIFO or a device (or a link to one) is refused, naming what it is."""
    if (
        path.suffix.lower() == ".gguf"
        and not path.is_dir()
        and (path.exists() or path.is_symlink())
    ):
        try:
            check_user_file(path, "model")
        except UserFileError as exc:
            raise RegistryError(str(exc)) from None
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


def peek_architecture(path: Path, fmt: str) -> str | None:
    """The architecture from the GGUF metadata or config.json (models/files' own readers, so a
    hostile file costs one bounded parse), or None when it cannot be read."""
    try:
        if fmt == "gguf":
            return _gguf_architecture(path)
        folder = path if path.is_dir() else path.parent
        config = read_json_file(folder / "config.json", f"{folder.name}/config.json")
        return hf_architecture(config) if isinstance(config, dict) else None
    except ModelFileError:
        return None


def _gguf_architecture(path: Path) -> str | None:
    try:
        with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            metadata = parse_gguf_metadata(buf, path.name)
    except (OSError, ValueError):  # unreadable, or empty (mmap refuses 0 bytes)
        return None
    arch = metadata.get("general.architecture")
    return arch if isinstance(arch, str) and arch else None


def sha256_file(path: Path, block_bytes: int = 1 << 22) -> str:
    """Hex SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(block_bytes):
            digest.update(block)
    return digest.hexdigest()
