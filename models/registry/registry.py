"""The local model index: names, aliases, paths, digests, sizes; `Registry.resolve`.

A model reference is a registry name or alias, `gemma3-270m` (the packaged starter, assembled into
the data dir on first use), a path to a .gguf file, or a safetensors folder. The index is one
SQLite file in the data dir (store.py); this module is the API app uses (app/loading.py turns
a resolved reference into what the engine loads).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path

from ember.models.errors import ModelFileError, RegistryError
from ember.models.registry.probe import (
    default_name,
    detect_format,
    model_files,
    model_size,
    peek_architecture,
    sha256_file,
)
from ember.models.registry.store import ModelRecord, RegistryStore
from ember.text import has_controls

__all__ = ["DiskUsage", "ModelRecord", "Registry", "ResolvedModel"]

# (absolute path, size, mtime_ns) -> SHA-256: files this process already hashed or looked up
_DIGESTS: dict[tuple[str, int, int], str] = {}


@dataclass(frozen=True)
class ResolvedModel:
    """Where a model reference points: a local file/folder (or a remote server URL)."""

    name: str
    path: Path
    format: str  # "gguf" | "safetensors" | "remote"
    architecture: str | None = None
    sha256: str | None = None
    url: str | None = None  # set when format == "remote"


@dataclass(frozen=True)
class DiskUsage:
    """Bytes on disk per registered model; owned_bytes counts only files Ember downloaded."""

    by_model: dict[str, int]
    total_bytes: int
    owned_bytes: int


class Registry:
    """The local model index: a SQLite file and the folder downloads go to (both from app's
    paths: open_registry in app/loading.py)."""

    def __init__(self, db_path: Path, models_dir: Path) -> None:
        self.store = RegistryStore(db_path)
        self.models_dir = models_dir

    # ---- reading -------------------------------------------------------------------------

    def list_models(self) -> list[ModelRecord]:
        """Every registered model, by name."""
        return self.store.all()

    def find(self, name_or_alias: str) -> ModelRecord | None:
        """The record for a name or alias, or None."""
        return self.store.find(name_or_alias)

    def get(self, name_or_alias: str) -> ModelRecord:
        """The record for a name or alias; RegistryError when unknown."""
        record = self.store.find(name_or_alias)
        if record is None:
            raise RegistryError(_unknown_message(name_or_alias))
        return record

    def disk_usage(self) -> DiskUsage:
        """Bytes on disk by model (files that still exist), the total and Ember's own share."""
        by_model: dict[str, int] = {}
        owned = 0
        for record in self.store.all():
            if record.format == "remote" or not record.path.exists():
                by_model[record.name] = 0
                continue
            size_bytes = model_size(record.path, record.format)
            by_model[record.name] = size_bytes
            owned += size_bytes if record.owned else 0
        return DiskUsage(by_model, sum(by_model.values()), owned)

    # ---- writing -------------------------------------------------------------------------

    def register(self, record: ModelRecord) -> ModelRecord:
        """Insert or update a record; fills size and architecture from the files if missing.
        A single-file GGUF's known SHA-256 (the Hub's, checked while downloading) is
        remembered as its digest, so the first load does not hash it again."""
        _check_name(record.name, "a model name")
        if record.format != "remote" and record.path.exists():
            files = model_files(record.path, record.format)
            if record.sha256 and record.format == "gguf" and files == [record.path]:
                stat = record.path.stat()
                self.store.remember_digest(
                    record.path, stat.st_size, stat.st_mtime_ns, record.sha256
                )
            if not record.size_bytes:
                record = replace(record, size_bytes=model_size(record.path, record.format))
            if record.architecture is None:
                record = replace(record, architecture=peek_architecture(record.path, record.format))
        self.store.put(record)
        return self.get(record.name)

    def add_path(self, path: Path, name: str | None = None) -> ModelRecord:
        """Validate a local GGUF file or safetensors folder and register it in place (no copy)."""
        path = Path(os.path.abspath(path.expanduser()))  # keep symlinks (HF cache snapshots)
        if not path.exists():
            raise RegistryError(f"{path}: no such file or folder")
        fmt = detect_format(path)
        from ember.models.errors import ModelFileError
        from ember.models.files.inspect import inspect_model

        try:
            info = inspect_model(path)
        except ModelFileError as exc:
            raise RegistryError(f"{path}: not added: {exc}") from None
        name = name or default_name(path, fmt)
        existing = self.store.find(name)
        if existing is not None and existing.path != path:
            raise RegistryError(
                f"{name}: already registered for {existing.path}; pass another name"
            )
        record = ModelRecord(
            name=name,
            path=path,
            format=fmt,
            architecture=info.architecture,
            parameters=info.n_params,
            quant=info.quant,
            size_bytes=model_size(path, fmt),
            owned=False,
        )
        return self.register(record)

    def alias(self, alias: str, target: str) -> ModelRecord:
        """Make alias another name for the model target (a name or an existing alias)."""
        record = self.get(target)
        _check_name(alias, "an alias")
        if not alias or "/" in alias or alias.endswith(".gguf"):
            raise RegistryError(f"{alias!r}: an alias must be a plain name (no '/' or .gguf)")
        self.store.set_alias(alias, record.name)
        return self.get(record.name)

    def remove(self, name_or_alias: str) -> int:
        """Forget a model; delete its files only if Ember downloaded them. Returns bytes freed."""
        record = self.get(name_or_alias)
        freed = 0
        if record.owned and record.format != "remote" and record.path.exists():
            freed = _delete_owned(record, self.models_dir)
        self.store.delete(record.name)
        return freed

    def touch_last_used(self, name_or_alias: str) -> None:
        """Record that a model was just used (the TUI sorts by it)."""
        record = self.store.find(name_or_alias)
        if record is not None:
            self.store.touch(record.name, time.time())

    # ---- digests -------------------------------------------------------------------------

    def digest(self, path: Path, fmt: str) -> str:
        """The one content digest of a model (it keys the prefix store and the packed-weight
        cache): SHA-256 of a single GGUF file; for multi-file models, SHA-256 over each file's
        name + digest. Each file is hashed once: cached by (path, size, mtime) in the database
        and in this process."""
        files = model_files(path, fmt)
        if not files:
            raise RegistryError(f"{path}: no model files to digest")
        if fmt == "gguf" and len(files) == 1:
            return self._file_digest(files[0])
        manifest = hashlib.sha256()
        for file in files:
            manifest.update(f"{file.name}\0{self._file_digest(file)}\n".encode())
        return manifest.hexdigest()

    def _file_digest(self, path: Path) -> str:
        path = Path(os.path.abspath(path))
        stat = path.stat()
        key = (str(path), stat.st_size, stat.st_mtime_ns)
        value = _DIGESTS.get(key)
        if value is None:
            value = self.store.cached_digest(path, stat.st_size, stat.st_mtime_ns)
            if value is None:
                value = sha256_file(path)
                self.store.remember_digest(path, stat.st_size, stat.st_mtime_ns, value)
            _DIGESTS[key] = value
        return value

    # ---- resolving -----------------------------------------------------------------------

    def resolve(self, ref: str) -> ResolvedModel:
        """Turn a model reference into a local path (see the module docstring)."""
        if ref.startswith(("http://", "https://")):
            return ResolvedModel(name=ref, path=Path(), format="remote", url=ref)
        record = self.store.find(ref)
        if record is not None and (record.format == "remote" or record.path.exists()):
            return _resolved(record)
        from ember.models.registry.starter import STARTER_NAME

        if ref == STARTER_NAME or (record is not None and record.name == STARTER_NAME):
            return _resolved(self._ensure_starter())
        if record is not None:
            raise RegistryError(
                f"{record.name}: registered at {record.path}, which no longer exists; "
                f"run `ember rm {record.name}` and add or pull it again"
            )
        path = Path(ref).expanduser()
        if path.exists():
            fmt = detect_format(path)
            path = Path(os.path.abspath(path))
            known = self.store.find_by_path(path)
            if known is not None:
                return _resolved(known)
            if fmt == "safetensors" and path.is_file():
                path = path.parent
            return ResolvedModel(default_name(path, fmt), path, fmt, peek_architecture(path, fmt))
        pulled = [r for r in self.store.all() if r.name.startswith(ref + ":") and r.path.exists()]
        if pulled:  # `org/repo` after `ember pull org/repo`: its most recently added quant
            return _resolved(max(pulled, key=lambda r: r.added_at))
        raise RegistryError(_unknown_message(ref))

    def _ensure_starter(self) -> ModelRecord:
        from ember.models.registry.starter import STARTER_NAME, STARTER_PACKAGE, starter_path

        try:
            path = starter_path(self.models_dir)
        except ModelFileError as exc:
            raise RegistryError(str(exc)) from None
        import importlib

        expected = str(importlib.import_module(STARTER_PACKAGE).EXPECTED_SHA256)
        stat = path.stat()
        self.store.remember_digest(path, stat.st_size, stat.st_mtime_ns, expected)
        record = ModelRecord(
            name=STARTER_NAME,
            path=path,
            format="gguf",
            quant="Q4_K_M",
            sha256=expected,
            source_repo=f"pypi:{STARTER_PACKAGE.replace('_', '-')}",
            source_file=path.name,
            owned=True,
        )
        existing = self.store.find(STARTER_NAME)
        if existing is not None:
            record = replace(record, added_at=existing.added_at, last_used_at=existing.last_used_at)
        return self.register(record)


def _resolved(record: ModelRecord) -> ResolvedModel:
    url = str(record.source_repo) if record.format == "remote" else None
    return ResolvedModel(
        record.name, record.path, record.format, record.architecture, record.sha256, url
    )


def _unknown_message(ref: str) -> str:
    return (
        f"{ref}: no such model (not a registered name, alias or an existing .gguf file or "
        f"safetensors folder); see `ember list`, or download it with `ember pull {ref}`"
    )


def _delete_owned(record: ModelRecord, models_dir: Path) -> int:
    """Delete a downloaded model's files (never anything outside models_dir). Returns bytes."""
    root = models_dir.resolve()
    freed = 0
    for file in model_files(record.path, record.format):
        if not file.exists() or not file.resolve().is_relative_to(root):
            continue
        freed += file.stat().st_size
        file.unlink()
        for suffix in (".sha256", ".lock", ".part", ".part.json"):  # stamps and leftovers
            file.with_name(file.name + suffix).unlink(missing_ok=True)
    folder = record.path if record.path.is_dir() else record.path.parent
    if record.format == "safetensors" and folder.resolve().is_relative_to(root):
        if folder.resolve() != root:
            shutil.rmtree(folder, ignore_errors=True)
        folder = folder.parent
    # drop folders left empty, up to (not including) models_dir
    while folder.exists() and folder.resolve() != root and folder.resolve().is_relative_to(root):
        if any(folder.iterdir()):
            break
        folder.rmdir()
        folder = folder.parent
    return freed


def _check_name(name: str, what: str) -> None:
    if has_controls(name):
        raise RegistryError(f"{name!r}: {what} must not contain control characters; pass --name")
