"""RegistryCatalog: the models screen's ModelCatalog over ember.models.registry.registry, hub and hub_pull.

Heavy modules (huggingface_hub through models.hub) are imported inside the calls that need them.
"""

from __future__ import annotations

import threading
from typing import Any

from ember.app.catalog.catalog import HubRepo, LocalModel, ProgressCallback, QuantOption
from ember.paths import Paths


def _local(record: Any) -> LocalModel:
    return LocalModel(
        name=str(record.name),
        size_bytes=int(record.size_bytes or 0),
        quant=str(record.quant or "-"),
        architecture=str(record.architecture or "-"),
        last_used_at=record.last_used_at,
        path=str(record.path),
    )


class RegistryCatalog:
    """The real catalog: the local registry, Hub search and listing, pulls with progress."""

    def __init__(self, paths: Paths, ctx: int = 4096) -> None:
        self.paths = paths
        self.ctx = ctx

    def _registry(self) -> Any:
        from ember.app.loading import open_registry

        return open_registry(self.paths)

    def list_local(self) -> list[LocalModel]:
        return [_local(r) for r in self._registry().list_models()]

    def delete(self, name: str) -> None:
        self._registry().remove(name)

    def starter_available(self) -> bool:
        from ember.models.registry.starter import starter_installed

        return starter_installed()

    def install_starter(self) -> LocalModel:
        from ember.models.registry.starter import STARTER_NAME

        registry = self._registry()
        registry.resolve(STARTER_NAME)  # assembles and registers the packaged starter
        return _local(registry.get(STARTER_NAME))

    def starter_sibling(self) -> tuple[HubRepo, QuantOption] | None:
        from ember.models.hub.catalog import load_catalog
        from ember.models.hub.client import is_offline
        from ember.models.registry.starter import STARTER_SIBLING

        entry = load_catalog().get(STARTER_SIBLING)
        if entry is None or entry.quant is None or is_offline():
            return None
        repo = HubRepo(entry.repo, description=f"{entry.name}: {entry.summary}")
        return repo, QuantOption(entry.quant, entry.quant, entry.size_bytes)  # label = filename

    def curated(self) -> list[HubRepo]:
        from ember.models.hub.catalog import load_catalog

        return [
            HubRepo(e.repo, description=f"{e.name}: {e.summary}")
            for e in load_catalog().values()
            if e.format == "gguf"
        ]

    def offline(self) -> bool:
        from ember.models.hub.client import is_offline

        return is_offline()

    def search(self, query: str) -> list[HubRepo]:
        from ember.models.hub import client as hub

        return [HubRepo(h.repo_id, h.downloads, h.likes) for h in hub.search(query, fmt="gguf")]

    def quants(self, repo_id: str) -> list[QuantOption]:
        from ember.models.hub import client as hub
        from ember.models.hub.select import gguf_choices

        listing = hub.list_repo(repo_id)
        # QuantOption.filename carries the choice label: `repo:LABEL` is the pull reference
        return [QuantOption(c.label, c.label, c.size_bytes) for c in gguf_choices(listing)]

    def download(
        self, repo_id: str, filename: str, progress: ProgressCallback, cancel: threading.Event
    ) -> LocalModel:
        from ember.models.hub.pull import Puller

        def on_progress(event: Any) -> None:
            progress(int(event.bytes_done), int(event.bytes_total))

        ref = f"{repo_id}/{filename}" if filename.endswith(".gguf") else f"{repo_id}:{filename}"
        puller = Puller(self._registry(), ctx=self.ctx, on_progress=on_progress, cancel=cancel)
        return _local(puller.pull(ref).record)
