"""inspect_model on GGUF files and safetensors folders, and on the real starter model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ember.models.errors import ModelFileError
from ember.models.files.inspect import builtin_template_name, inspect_model
from tests.fixtures.quick_gguf import write_tiny_gguf
from tests.fixtures.quick_hf import write_tiny_hf


def test_gguf_info(tmp_path: Path) -> None:
    path = write_tiny_gguf(tmp_path / "q.gguf", "qwen3")
    info = inspect_model(path)
    assert (info.format, info.architecture, info.path, info.supported) == (
        "gguf",
        "qwen3",
        path,
        True,
    )
    assert info.file_size == path.stat().st_size
    assert info.context_length == 256 and info.n_layers == 2 and info.hidden_size == 64
    assert set(info.quant_mix) == {"F32", "F16", "Q8_0", "Q4_0"}
    assert info.quant == next(iter(info.quant_mix))  # no general.file_type: the largest type
    assert info.chat_template_source == "gguf metadata"
    expected_params = (
        32 * 64 * 2 + 64 + 2 * (64 * 2 + 32 * 2 + 64 * 64 * 2 + 32 * 64 * 2 + 3 * 128 * 64)
    )
    assert info.n_params == expected_params
    out = info.to_dict()
    json.dumps(out)
    assert out["parameters"] == expected_params and out["size_bytes"] == info.file_size
    assert out["path"] == str(path) and out["gguf_version"] == 3
    assert out["model_name"] == "tiny-qwen3" and "name" not in out  # "name" is the registry's


@pytest.mark.parametrize(
    ("arch", "source"), [("gemma3", "built-in gemma"), ("llama", "built-in chatml")]
)
def test_fallback_template_source(arch: str, source: str, tmp_path: Path) -> None:
    path = write_tiny_gguf(tmp_path / "t.gguf", arch, chat_template=False)
    assert inspect_model(path).chat_template_source == source
    assert builtin_template_name(arch) == source.removeprefix("built-in ")


def test_safetensors_info(tmp_path: Path) -> None:
    folder = write_tiny_hf(tmp_path / "tiny-qwen2", "qwen2", n_shards=2)
    info = inspect_model(folder)
    assert (info.format, info.architecture, info.supported) == ("safetensors", "qwen2", True)
    assert info.quant == "BF16" and set(info.quant_mix) == {"BF16"}
    assert info.chat_template_source == "tokenizer_config.json"
    assert info.context_length == 512 and info.extra["n_shards"] == 2
    assert info.file_size == sum(
        p.stat().st_size for p in folder.iterdir() if p.name != "model.safetensors.index.json"
    )
    assert inspect_model(folder / "model-00001-of-00002.safetensors").path == folder
    no_template = write_tiny_hf(tmp_path / "g", "gemma3", chat_template=False)
    assert inspect_model(no_template).chat_template_source == "built-in gemma"


def test_refusals(tmp_path: Path) -> None:
    with pytest.raises(ModelFileError, match="no such file"):
        inspect_model(tmp_path / "nope.gguf")
    pickle = tmp_path / "pytorch_model.bin"
    pickle.write_bytes(b"\x80\x04K\x01.")
    with pytest.raises(ModelFileError, match="pickle checkpoint refused"):
        inspect_model(pickle)
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(ModelFileError, match="not a GGUF file"):
        inspect_model(text)


@pytest.mark.model
def test_starter_model_info(starter_gguf: Path) -> None:
    info = inspect_model(starter_gguf)
    assert (info.architecture, info.context_length, info.n_layers) == ("gemma3", 32768, 18)
    assert info.quant == "Q4_K_M" and {"Q4_K", "Q6_K"} <= set(info.quant_mix)
    assert info.file_size == starter_gguf.stat().st_size
    assert info.chat_template_source == "built-in gemma"  # the file carries no template
    assert info.name == "Gemma 3 270m" and info.supported
