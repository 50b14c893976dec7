"""What the models screen needs from the registry and the Hub, as one narrow protocol."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

ProgressCallback = Callable[[int, int], None]  # (bytes done, bytes total; 0 = unknown)


@dataclass(frozen=True)
class LocalModel:
    """A model in the local registry."""

    name: str
    size_bytes: int
    quant: str
    architecture: str
    last_used_at: float | None
    path: str = ""


@dataclass(frozen=True)
class HubRepo:
    """One Hub search result."""

    repo_id: str
    downloads: int = 0
    likes: int = 0
    description: str = ""


@dataclass(frozen=True)
class QuantOption:
    """One downloadable file of a repo (a GGUF quant, or a safetensors set)."""

    filename: str
    quant: str
    size_bytes: int


class ModelCatalog(Protocol):
    """Local models, Hub search and downloads (ember.models.registry.registry / hub behind it)."""

    def list_local(self) -> list[LocalModel]: ...

    def delete(self, name: str) -> None: ...

    def starter_available(self) -> bool: ...

    def install_starter(self) -> LocalModel: ...

    def starter_sibling(self) -> tuple[HubRepo, QuantOption] | None:
        """The starter's instruction-tuned sibling to download (repo and quant), None when the
        catalog has none or the Hub is off (offline mode)."""
        ...

    def curated(self) -> list[HubRepo]: ...

    def offline(self) -> bool:
        """True when the Hub must not be reached (HF_HUB_OFFLINE=1 or --offline)."""
        ...

    def search(self, query: str) -> list[HubRepo]: ...

    def quants(self, repo_id: str) -> list[QuantOption]: ...

    def download(
        self, repo_id: str, filename: str, progress: ProgressCallback, cancel: threading.Event
    ) -> LocalModel: ...


def total_memory_bytes() -> int:
    """Physical RAM of this machine (0 when unknown)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return 0


def fit_badge(size_bytes: int, memory_bytes: int | None = None) -> str:
    """'fits', 'tight' or 'too big': weights plus ~20% for KV cache and activations vs RAM."""
    memory = total_memory_bytes() if memory_bytes is None else memory_bytes
    if memory <= 0 or size_bytes <= 0:
        return "?"
    need = size_bytes * 1.2
    if need <= 0.6 * memory:
        return "fits"
    if need <= 0.9 * memory:
        return "tight"
    return "too big"


def human_size(size_bytes: int) -> str:
    """1.2 GB style sizes."""
    size = float(size_bytes)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if size < 1000 or unit == "TB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size_bytes} B"
