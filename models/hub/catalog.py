"""The curated catalog (catalog.json): small models `ember pull NAME` understands."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ember.models.errors import DownloadError

CATALOG_FILE = Path(__file__).with_name("catalog.json")


@dataclass(frozen=True)
class CatalogEntry:
    """One curated model: a short name, its Hub repo, default quant, size and draft model."""

    name: str
    repo: str
    quant: str | None
    size_bytes: int
    format: str
    draft: str | None
    summary: str

    @property
    def ref(self) -> str:
        """The `ember pull` reference this name stands for."""
        return f"{self.repo}:{self.quant}" if self.quant else self.repo


@cache
def load_catalog(path: Path = CATALOG_FILE) -> dict[str, CatalogEntry]:
    """Catalog entries by name."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    entries = [CatalogEntry(**item) for item in raw["models"]]
    return {e.name: e for e in entries}


def catalog_entry(name: str) -> CatalogEntry:
    """The entry for name; DownloadError listing the known names otherwise."""
    entries = load_catalog()
    if name not in entries:
        known = ", ".join(sorted(entries))
        raise DownloadError(
            f"{name}: not a catalog model nor an org/repo reference (catalog: {known})"
        )
    return entries[name]
