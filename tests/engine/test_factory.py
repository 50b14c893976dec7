from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ember.engine.api import EngineOptions
from ember.engine.errors import EngineError
from ember.engine.runners import factory


def test_auto_picks_llamacpp_for_gguf_on_cpu_and_torch_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(factory.importlib.util, "find_spec", lambda name: object())
    cpu = EngineOptions(model="m", device="cpu")
    assert factory.pick_runner(cpu, "gguf") == "llama.cpp"
    assert factory.pick_runner(cpu, "safetensors") == "torch"
    assert factory.pick_runner(EngineOptions(model="m", device="cuda"), "gguf") == "torch"
    assert (
        factory.pick_runner(EngineOptions(model="m", runner="torch", device="cpu"), "gguf")
        == "torch"
    )
    monkeypatch.setattr(factory.importlib.util, "find_spec", lambda name: None)
    assert factory.pick_runner(cpu, "gguf") == "torch"  # no llama-cpp-python installed


def test_unknown_runner_and_bad_paths() -> None:
    with pytest.raises(EngineError, match="choose one of"):
        factory.pick_runner(EngineOptions(model="m", runner="vllm"), "gguf")


def test_resolve_falls_back_to_paths_without_registry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ember.models.registry.registry", None)  # import fails
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    folder = tmp_path / "hf"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    assert factory.resolve(str(gguf)).format == "gguf"
    assert factory.resolve(str(folder)).format == "safetensors"
    with pytest.raises(EngineError):
        factory.resolve(str(tmp_path / "missing.gguf"))


def test_resolve_uses_the_registry(tmp_path: Path) -> None:
    from ember.models.errors import ModelFileError
    from ember.models.registry.registry import RegistryError

    with pytest.raises((RegistryError, ModelFileError, EngineError)):
        factory.resolve(str(tmp_path / "missing.gguf"))


def test_fake_runner_loads_without_a_model_file() -> None:
    runner, chat, name = factory.load_parts(EngineOptions(model="anything", runner="fake"))
    assert runner.info.name == "fake" and name == "fake" and chat is not None


def test_loading_a_registered_model_marks_it_used(tiny_models: object) -> None:
    from ember.models.registry.registry import Registry

    path = tiny_models.gguf("llama", "Q8_0")  # type: ignore[attr-defined]
    Registry().add_path(path, name="tiny")
    assert Registry().get("tiny").last_used_at is None
    runner, _, name = factory.load_parts(EngineOptions(model="tiny", runner="torch", device="cpu"))
    runner.close()
    assert name == "tiny"
    assert Registry().get("tiny").last_used_at is not None
