from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ember.app.loading import open_registry
from ember.models.errors import RegistryError
from ember.models.registry.probe import gguf_shards, sha256_file
from ember.models.registry.registry import Registry
from ember.models.registry.store import ModelRecord
from tests.fixtures.quick_gguf import write_tiny_gguf
from tests.fixtures.quick_hf import write_tiny_hf


@pytest.fixture
def registry(tmp_path: Path) -> Registry:
    return Registry(tmp_path / "reg.sqlite3", tmp_path / "models")


def test_resolve_gguf_path(tmp_path: Path) -> None:
    path = write_tiny_gguf(tmp_path / "tiny-q8.gguf", arch="qwen2")
    resolved = open_registry().resolve(str(path))
    assert resolved.format == "gguf"
    assert resolved.path == path.resolve()
    assert resolved.name == "tiny-q8"
    assert resolved.architecture == "qwen2"


def test_resolve_safetensors_folder(tmp_path: Path) -> None:
    folder = write_tiny_hf(tmp_path / "tiny-st", "qwen3")
    resolved = open_registry().resolve(str(folder))
    assert (resolved.format, resolved.name, resolved.architecture) == (
        "safetensors",
        "tiny-st",
        "qwen3",
    )


def test_unknown_ref_names_it_and_suggests(tmp_path: Path) -> None:
    with pytest.raises(RegistryError, match=r"no-such-model.*ember list.*ember pull no-such-model"):
        open_registry().resolve("no-such-model")
    (tmp_path / "x.txt").write_text("hi")
    with pytest.raises(RegistryError, match="not a model"):
        open_registry().resolve(str(tmp_path / "x.txt"))


def test_add_alias_list_get(registry: Registry, tmp_path: Path) -> None:
    path = write_tiny_gguf(tmp_path / "user" / "mine.gguf")
    record = registry.add_path(path)
    assert record.name == "mine" and record.owned is False
    assert record.size_bytes == path.stat().st_size
    assert record.architecture == "llama"
    registry.alias("m", "mine")
    assert registry.get("m").name == "mine"
    assert registry.resolve("m").path == path.resolve()
    assert [r.name for r in registry.list_models()] == ["mine"]
    assert registry.get("mine").aliases == ("m",)
    with pytest.raises(RegistryError, match="already a model name"):
        registry.alias("mine", "mine")
    with pytest.raises(RegistryError, match="nope"):
        registry.alias("x", "nope")


def test_remove_never_deletes_user_files(registry: Registry, tmp_path: Path) -> None:
    path = write_tiny_gguf(tmp_path / "user" / "mine.gguf")
    registry.add_path(path)
    assert registry.remove("mine") == 0
    assert path.exists()
    assert registry.find("mine") is None


def test_remove_deletes_owned_files(registry: Registry) -> None:
    path = write_tiny_gguf(registry.models_dir / "org--repo" / "m.gguf")
    size = path.stat().st_size
    registry.register(ModelRecord(name="org/repo", path=path, format="gguf", owned=True))
    registry.alias("r", "org/repo")
    usage = registry.disk_usage()
    assert usage.by_model == {"org/repo": size} and usage.owned_bytes == size
    assert registry.remove("r") == size
    assert not path.exists() and not path.parent.exists()
    assert registry.find("r") is None and registry.list_models() == []


def test_owned_file_outside_models_dir_is_kept(registry: Registry, tmp_path: Path) -> None:
    path = write_tiny_gguf(tmp_path / "elsewhere" / "m.gguf")
    registry.register(ModelRecord(name="odd", path=path, format="gguf", owned=True))
    assert registry.remove("odd") == 0
    assert path.exists()


def test_touch_last_used(registry: Registry, tmp_path: Path) -> None:
    registry.add_path(write_tiny_gguf(tmp_path / "a.gguf"))
    assert registry.get("a").last_used_at is None
    registry.touch_last_used("a")
    assert registry.get("a").last_used_at is not None


def test_missing_registered_file_is_a_clear_error(registry: Registry, tmp_path: Path) -> None:
    path = write_tiny_gguf(tmp_path / "gone.gguf")
    registry.add_path(path)
    path.unlink()
    with pytest.raises(RegistryError, match="no longer exists.*ember rm gone"):
        registry.resolve("gone")


def test_digest_cached_and_split(registry: Registry, tmp_path: Path) -> None:
    single = write_tiny_gguf(tmp_path / "one.gguf")
    assert registry.digest(single, "gguf") == sha256_file(single)
    first = write_tiny_gguf(tmp_path / "big-00001-of-00002.gguf", seed=1)
    write_tiny_gguf(tmp_path / "big-00002-of-00002.gguf", seed=2)
    assert [p.name for p in gguf_shards(first)] == [
        "big-00001-of-00002.gguf",
        "big-00002-of-00002.gguf",
    ]
    record = registry.add_path(first)
    assert record.name == "big"
    assert record.size_bytes == sum(p.stat().st_size for p in gguf_shards(first))
    assert registry.digest(first, "gguf") != sha256_file(first)


def test_registry_uses_wal(registry: Registry, tmp_path: Path) -> None:
    registry.add_path(write_tiny_gguf(tmp_path / "a.gguf"))
    mode = sqlite3.connect(registry.store.db_path).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


@pytest.mark.model
def test_starter_assembled_into_data_dir(ember_home: Path) -> None:
    resolved = open_registry().resolve("gemma3-270m")
    assert resolved.path.is_relative_to(ember_home)
    assert resolved.format == "gguf" and resolved.architecture == "gemma3"
    assert resolved.sha256 is not None and len(resolved.sha256) == 64
    record = open_registry().get("gemma3-270m")
    assert record.owned and record.size_bytes == resolved.path.stat().st_size


def test_corrupt_registry_is_a_clear_error(registry: Registry) -> None:
    registry.store.db_path.parent.mkdir(parents=True, exist_ok=True)
    registry.store.db_path.write_bytes(b"not a database" * 100)
    with pytest.raises(
        RegistryError,
        match=r"reg.sqlite3: model registry error \(file is not a database\); move the damaged",
    ):
        registry.list_models()
