"""Pickle checkpoints (.bin, .pt, .pth, .ckpt, .pkl, zips holding data.pkl): recognised, refused.

Public API (re-exported by models/files/safetensors.py):
    is_pickle_checkpoint(path) -> bool   by name, and by content when the file exists
    refuse_pickle(path) -> None          ModelFileError with the reason when it is one

Nothing here ever unpickles: content checks read the first two bytes (pickle protocol marker)
or the zip central directory (file names only).
"""

from __future__ import annotations

import zipfile
from pathlib import Path

PICKLE_SUFFIXES = frozenset({".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle"})


def _zip_has_pickle(path: Path) -> bool:
    try:
        if not zipfile.is_zipfile(path):
            return False
        with zipfile.ZipFile(path) as archive:
            return any(n == "data.pkl" or n.endswith("/data.pkl") for n in archive.namelist())
    except (OSError, zipfile.BadZipFile, ValueError, EOFError):
        return False


def _starts_like_pickle(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            head = f.read(2)
    except OSError:
        return False
    return len(head) == 2 and head[0] == 0x80 and 2 <= head[1] <= 5  # PROTO opcode + version


def is_pickle_checkpoint(path: str | Path) -> bool:
    """Whether a file is (or by its name would be) a pickle-based checkpoint."""
    path = Path(path)
    if path.suffix.lower() in PICKLE_SUFFIXES:
        return True
    if not path.is_file():
        return False
    return _starts_like_pickle(path) or _zip_has_pickle(path)


def refuse_pickle(path: str | Path) -> None:
    """Raise ModelFileError when path is a pickle checkpoint; return quietly otherwise."""
    from ember.models.errors import ModelFileError

    path = Path(path)
    if is_pickle_checkpoint(path):
        raise ModelFileError(
            f"{path.name}: pickle checkpoint refused: loading pickle runs arbitrary code, so Ember "
            "never opens .bin/.pt/.pth/.ckpt/.pkl files; use the model's .safetensors or .gguf files"
        )
