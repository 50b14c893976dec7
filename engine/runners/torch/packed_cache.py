"""Packed-weight cache: the int4 / int8 / dense forms a model's linear layers were converted to,
saved once per (model file, build options, torch version) under the cache dir, so later loads
map them from disk (`torch.load(mmap=True)`: zero-copy, paged in on use) instead of converting.

The cache is an optimization only: a missing, truncated, corrupt or mismatched file is ignored
with a one-line warning and the weights are converted again (and the file rewritten). Files are
written to a temporary name and renamed, so a crash never leaves a half-written cache entry.
The folder comes from app (EngineOptions.packed_cache_dir: <cache dir>/packed, or
EMBER_PACKED_CACHE=DIR; EMBER_PACKED_CACHE=off disables it), the key from the model's digest.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

FORMAT_VERSION = 1
MAX_BYTES = 4 << 30  # the packed/ folder is pruned (least recently used first) beyond this

log = logging.getLogger(__name__)


def cache_key(model_path: Path, digest: str, options: str) -> str:
    """Hex key of a model file's packed form: content digest, size and mtime, build options."""
    stamps = []
    files = sorted(model_path.glob("*.safetensors")) if model_path.is_dir() else [model_path]
    for f in files:
        st = f.stat()
        stamps.append(f"{f.name}:{st.st_size}:{st.st_mtime_ns}")
    text = f"v{FORMAT_VERSION}|{digest}|{','.join(stamps)}|{options}|torch {torch.__version__}"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclass
class PackedCache:
    """One model's entry: `found` holds the loaded tensors (a hit), `record` collects a build."""

    path: Path | None  # None: caching disabled
    found: dict[str, Any] | None = None  # name -> tensor or metadata, from a previous build
    record: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def open(cls, root: Path | None, key: str) -> PackedCache:
        """Look up key under root (a miss, or a bad file, gives an empty cache to fill)."""
        if root is None:
            return cls(None)
        path = root / f"{key}.pt"
        if not path.is_file():
            return cls(path)
        try:
            found = torch.load(path, map_location="cpu", mmap=True, weights_only=True)
            if not isinstance(found, dict) or found.get("version") != FORMAT_VERSION:
                raise ValueError("not a packed-weight file of this version")
            os.utime(path)  # least-recently-used pruning goes by mtime
        except Exception as exc:  # noqa: BLE001 - any unreadable cache file is just a miss
            log.warning("%s: packed-weight cache ignored (%s); converting again", path, exc)
            return cls(path)
        return cls(path, found=found["tensors"])

    def get(self, name: str) -> Any:
        """The cached value of name, or None."""
        return None if self.found is None else self.found.get(name)

    def put(self, name: str, value: Any) -> None:
        """Remember a freshly built value (written by save())."""
        if self.path is not None and self.found is None:
            self.record[name] = value

    def save(self) -> None:
        """Write what a build recorded (atomically), then prune the folder to MAX_BYTES."""
        if self.path is None or self.found is not None or not self.record:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            torch.save({"version": FORMAT_VERSION, "tensors": self.record}, tmp)
            os.replace(tmp, self.path)
        except OSError as exc:
            log.warning("%s: could not write the packed-weight cache (%s)", self.path, exc)
            return
        finally:
            self.record = {}
        prune(self.path.parent, MAX_BYTES, keep=self.path)


STALE_TMP_S = 3600  # a temporary file this old was left by a crashed or killed writer


def prune(root: Path, max_bytes: int, keep: Path | None = None) -> None:
    """Delete stale temporary files, then the least recently used cache files until the folder
    holds <= max_bytes."""
    now = time.time()
    for tmp in root.glob(".*.tmp"):
        with contextlib.suppress(OSError):
            if now - tmp.stat().st_mtime > STALE_TMP_S:
                tmp.unlink()
    files = sorted(
        (p for p in root.glob("*.pt") if p != keep),
        key=lambda p: p.stat().st_mtime_ns,
    )
    total = sum(p.stat().st_size for p in root.glob("*.pt"))
    for p in files:
        if total <= max_bytes:
            break
        total -= p.stat().st_size
        p.unlink(missing_ok=True)
