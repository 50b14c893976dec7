from __future__ import annotations

import re
from pathlib import Path

import pytest

from ember.app.loading import open_registry
from ember.models.errors import DownloadError
from ember.models.hub.catalog import catalog_entry, load_catalog
from ember.models.hub.pull import Puller
from ember.models.hub.select import QUANT_PREFERENCE
from tests.fixtures.quick_gguf import write_tiny_gguf
from tests.models.hub.hub_server import HubServer


def test_catalog_is_consistent() -> None:
    entries = load_catalog()
    assert len(entries) >= 8
    for entry in entries.values():
        assert re.fullmatch(r"[\w.-]+/[\w.-]+", entry.repo), entry
        assert entry.format in ("gguf", "safetensors")
        assert (entry.quant in QUANT_PREFERENCE) == (entry.format == "gguf"), entry
        assert entry.size_bytes > 0 and entry.summary
        if entry.draft is not None:
            draft = entries[entry.draft]
            assert draft.size_bytes < entry.size_bytes, entry


def test_starter_name_is_never_a_download(monkeypatch: pytest.MonkeyPatch) -> None:
    """gemma3-270m is the packaged pretrained starter; its instruction-tuned sibling has a name
    of its own, so one name never means two models."""
    from ember.models.registry import starter

    entries = load_catalog()
    assert starter.STARTER_NAME not in entries
    sibling = entries[starter.STARTER_SIBLING]
    assert sibling.repo == "unsloth/gemma-3-270m-it-GGUF" and sibling.size_bytes == 253_000_000
    monkeypatch.setattr(starter, "starter_installed", lambda: False)
    with pytest.raises(DownloadError, match=r"^gemma3-270m is the packaged starter .*gemma3-270m-it$"):
        Puller(open_registry()).pull("gemma3-270m")


def test_unknown_catalog_name_lists_known() -> None:
    with pytest.raises(DownloadError, match=r"nope: not a catalog model.*qwen2.5-0.5b"):
        catalog_entry("nope")


def test_pull_catalog_name_sets_alias(hub: HubServer, tmp_path: Path) -> None:
    entry = catalog_entry("qwen2.5-0.5b")
    data = write_tiny_gguf(tmp_path / "q.gguf", arch="qwen2").read_bytes()
    hub.add_repo(
        entry.repo,
        {"qwen2.5-0.5b-instruct-q4_k_m.gguf": data, "qwen2.5-0.5b-instruct-q8_0.gguf": data},
    )
    result = Puller(open_registry()).pull("qwen2.5-0.5b")
    assert result.record.name == f"{entry.repo}:Q4_K_M"
    assert open_registry().resolve("qwen2.5-0.5b").path == result.record.path
    assert open_registry().get("qwen2.5-0.5b").aliases == ("qwen2.5-0.5b",)


def test_hf_cache_discovery_and_add(
    hub: HubServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from huggingface_hub import hf_hub_download, snapshot_download

    from ember.app.cli import main
    from ember.models.hub.cache import discover
    from ember.models.hub.client import hf_cache_dir
    from tests.fixtures.quick_hf import write_tiny_hf

    gguf = write_tiny_gguf(tmp_path / "g.gguf").read_bytes()
    hub.add_repo("org/g-GGUF", {"g-Q4_K_M.gguf": gguf, "g-Q8_0.gguf": gguf})
    folder = write_tiny_hf(tmp_path / "st")
    hub.add_repo("org/st", {p.name: p.read_bytes() for p in folder.iterdir()})
    hf_hub_download("org/g-GGUF", "g-Q8_0.gguf", cache_dir=hf_cache_dir(), endpoint=hub.url)
    snapshot_download("org/st", cache_dir=hf_cache_dir(), endpoint=hub.url)
    found = {(m.repo_id, m.label) for m in discover()}
    assert found == {("org/g-GGUF", "Q8_0"), ("org/st", "safetensors")}
    capsys.readouterr()
    assert main(["list"]) == 0
    assert "2 more in the Hugging Face cache" in capsys.readouterr().out
    assert main(["add", "--hf-cache"]) == 0
    names = {r.name: r for r in open_registry().list_models()}
    assert set(names) >= {"org/g-GGUF:Q8_0", "org/st"}
    assert not names["org/st"].owned and names["org/st"].format == "safetensors"
    assert open_registry().resolve("org/st").path.is_relative_to(hf_cache_dir())
    capsys.readouterr()
    assert main(["list"]) == 0
    assert "Hugging Face cache" not in capsys.readouterr().out
