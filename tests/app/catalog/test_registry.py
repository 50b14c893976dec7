"""RegistryCatalog against the real registry and a local fake Hub (tests/models/hub/hub_server.py)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from ember.app.catalog.registry import RegistryCatalog
from ember.models.errors import DownloadError
from ember.paths import get_paths
from tests.fixtures.quick_gguf import write_tiny_gguf
from tests.models.hub.hub_server import HubServer


def test_search_quants_download_list_delete(hub: HubServer, tmp_path: Path) -> None:
    q4 = write_tiny_gguf(tmp_path / "a.gguf", n_vocab=64, seed=1).read_bytes()
    q8 = write_tiny_gguf(tmp_path / "b.gguf", n_vocab=128, seed=2).read_bytes()
    hub.add_repo("org/tiny-GGUF", {"tiny-Q4_K_M.gguf": q4, "tiny-Q8_0.gguf": q8}, tags=["gguf"])
    hub.add_repo("org/tiny-st", {"model.safetensors": b"x"}, tags=["safetensors"])
    catalog = RegistryCatalog(get_paths())

    assert [r.repo_id for r in catalog.search("tiny")] == ["org/tiny-GGUF"]
    quants = {q.quant: q.size_bytes for q in catalog.quants("org/tiny-GGUF")}
    assert quants == {"Q4_K_M": len(q4), "Q8_0": len(q8)}

    seen: list[tuple[int, int]] = []
    model = catalog.download(
        "org/tiny-GGUF", "Q8_0", lambda done, total: seen.append((done, total)), threading.Event()
    )
    assert model.quant == "Q8_0" and model.size_bytes == len(q8) and model.architecture == "llama"
    assert seen[-1] == (len(q8), len(q8))
    assert model.name in [m.name for m in catalog.list_local()]

    catalog.delete(model.name)
    assert model.name not in [m.name for m in catalog.list_local()]


def test_cancelled_download_raises_download_error(hub: HubServer, tmp_path: Path) -> None:
    hub.add_repo("org/x-GGUF", {"x-Q4_K_M.gguf": write_tiny_gguf(tmp_path / "x.gguf").read_bytes()})
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(DownloadError):
        RegistryCatalog(get_paths()).download("org/x-GGUF", "Q4_K_M", lambda d, t: None, cancel)


def test_curated_list_comes_from_the_catalog() -> None:
    repos = [r.repo_id for r in RegistryCatalog(get_paths()).curated()]
    assert "unsloth/gemma-3-270m-it-GGUF" in repos
