"""peek_architecture reads through models/files' readers: a hostile file costs one bounded
parse and gives None, never a traceback."""

from __future__ import annotations

from pathlib import Path

from ember.models.registry.probe import peek_architecture
from tests.fixtures.quick_gguf import write_tiny_gguf
from tests.fixtures.quick_hf import write_tiny_hf
from tests.models.files.badfiles.hostile_hf import write_hostile


def test_architectures_use_the_description_s_names(tmp_path: Path) -> None:
    assert peek_architecture(write_tiny_gguf(tmp_path / "m.gguf", "qwen3"), "gguf") == "qwen3"
    folder = write_tiny_hf(tmp_path / "hf", "gemma3")  # config.json says gemma3_text
    assert peek_architecture(folder, "safetensors") == "gemma3"
    assert peek_architecture(folder / "model.safetensors", "safetensors") == "gemma3"


def test_unreadable_files_give_none(tmp_path: Path) -> None:
    empty = tmp_path / "empty.gguf"
    empty.touch()
    garbage = tmp_path / "garbage.gguf"
    garbage.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 64)
    for path in (empty, garbage, tmp_path / "missing.gguf"):
        assert peek_architecture(path, "gguf") is None
    deep = write_hostile(tmp_path / "deep", "nested_200k_deep")
    assert peek_architecture(deep, "safetensors") is None
