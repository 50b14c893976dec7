from __future__ import annotations

from pathlib import Path

import pytest

from ember.engine.api import EngineOptions, ModelFiles
from ember.engine.errors import EngineError
from ember.engine.runners import factory


def test_auto_measures_gguf_on_cpu_and_picks_torch_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(factory.importlib.util, "find_spec", lambda name: object())
    cpu = EngineOptions(model="m", device="cpu")
    assert factory.pick_runner(cpu, "gguf") == factory.MEASURED  # runner_choice.py decides
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


def test_fake_runner_loads_without_a_model_file() -> None:
    runner, chat, name = factory.load_parts(EngineOptions(model="anything", runner="fake"), None)
    assert runner.info.name == "fake" and name == "fake" and chat is not None


def test_a_real_runner_needs_a_resolved_model() -> None:
    with pytest.raises(EngineError, match="not resolved"):
        factory.load_parts(EngineOptions(model="tiny", runner="torch", device="cpu"), None)


def test_loading_touches_no_registry_and_uses_the_given_digest(tiny_models: object) -> None:
    """The engine loads what app resolved: no registry database appears, and the runner keys
    its snapshots with the digest it was handed."""
    from ember.paths import get_paths

    path = tiny_models.gguf("llama", "Q8_0")  # type: ignore[attr-defined]
    model = ModelFiles("tiny", path, "gguf", "ab" * 32)
    options = EngineOptions(model="tiny", runner="torch", device="cpu")
    runner, chat, name = factory.load_parts(options, model)
    runner.close()
    assert (name, runner.info.model_digest) == ("tiny", "ab" * 32) and chat is not None
    assert not get_paths().registry_db.exists()


def test_model_files_are_validated() -> None:
    with pytest.raises(EngineError, match="SHA-256"):
        ModelFiles("m", Path("m.gguf"), "gguf", "not-a-digest")
    with pytest.raises(EngineError, match="format"):
        ModelFiles("m", Path("m.bin"), "pickle", "ab" * 32)  # type: ignore[arg-type]
