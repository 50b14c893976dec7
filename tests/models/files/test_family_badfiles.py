"""The dense families' malformed files (badfiles/family_cases.py): one line each, naming the
tensor or field and why; never a traceback, a crash or a silent wrong answer."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from ember.engine.errors import EngineError
from ember.models.errors import ModelFileError
from ember.models.files.gguf import open_gguf
from ember.models.files.hparams.from_hf import from_hf_config
from ember.models.files.safetensors import open_safetensors
from tests.fixtures.quick_gguf import write_tiny_gguf
from tests.models.files.badfiles.family_cases import (
    FAMILY_CONFIG_CASES,
    FAMILY_GGUF_CASES,
    FAMILY_VALUE_CASES,
    edit_config,
)
from tests.models.files.badfiles.layout import GGUFSpec, build, spec_from_file


@pytest.fixture(scope="module")
def valid(tmp_path_factory: pytest.TempPathFactory) -> dict[str, GGUFSpec]:
    root = tmp_path_factory.mktemp("families")
    specs = {}
    for arch in ("phi3", "gemma2", "smollm3", "mistral3"):
        path = write_tiny_gguf(root / f"{arch}.gguf", arch)
        open_gguf(path).check_supported()  # the unedited file is valid
        specs[arch] = spec_from_file(path)
    return specs


def _write(spec: GGUFSpec, edit: Any, path: Path) -> Path:
    spec = spec.copy()
    edit(spec)
    path.write_bytes(build(spec)[0])
    return path


def _one_line(message: str, fragment: str) -> None:
    assert "\n" not in message and "Traceback" not in message, message
    assert fragment in message, message


@pytest.mark.parametrize("case", sorted(FAMILY_GGUF_CASES))
def test_bad_family_gguf(case: str, valid: dict[str, GGUFSpec], tmp_path: Path) -> None:
    arch, edit, fragment = FAMILY_GGUF_CASES[case]
    path = _write(valid[arch], edit, tmp_path / f"{case}.gguf")
    with pytest.raises(ModelFileError) as info:
        open_gguf(path).check_supported()
    assert str(info.value).startswith(f"{path.name}: ")
    _one_line(str(info.value), fragment)


@pytest.mark.parametrize("case", sorted(FAMILY_VALUE_CASES))
def test_bad_family_values_stop_the_torch_runner(
    case: str, valid: dict[str, GGUFSpec], tmp_path: Path
) -> None:
    from ember.engine.runners.torch.runner import TorchOptions, TorchRunner

    arch, edit, fragment = FAMILY_VALUE_CASES[case]
    path = _write(valid[arch], edit, tmp_path / f"{case}.gguf")
    runner = TorchRunner.load(path, TorchOptions(device="cpu"))
    with pytest.raises(EngineError) as info:  # the long list is read for a long context
        runner.init_kv(16, 16)
    _one_line(str(info.value), fragment)


@pytest.mark.parametrize("case", sorted(FAMILY_CONFIG_CASES))
def test_bad_family_config(case: str, tiny_models: Any) -> None:
    arch, change, fragment = FAMILY_CONFIG_CASES[case]
    config = json.loads((tiny_models.hf_dir(arch) / "config.json").read_text())
    from_hf_config(config)  # the unedited config is valid
    with pytest.raises(ModelFileError) as info:
        from_hf_config(edit_config(config, change), "config.json")
    assert str(info.value).startswith("config.json: ")
    _one_line(str(info.value), fragment)


def test_quantized_checkpoint_is_refused_by_name(tiny_models: Any, tmp_path: Path) -> None:
    """Ministral 3's released weights are FP8 with per-block scales: running the FP8 values as
    they are would be a silent wrong answer, so the runner refuses the folder in one line."""
    from ember.engine.runners.torch.runner import TorchOptions, TorchRunner

    folder = shutil.copytree(tiny_models.hf_dir("mistral3"), tmp_path / "fp8")
    config = json.loads((folder / "config.json").read_text())
    config["quantization_config"] = {"quant_method": "fp8", "weight_block_size": [128, 128]}
    (folder / "config.json").write_text(json.dumps(config))
    assert open_safetensors(folder).architecture == "mistral3"  # `ember show` still reads it
    with pytest.raises(ModelFileError) as info:
        TorchRunner.load(folder, TorchOptions(device="cpu"))
    _one_line(str(info.value), "config.json: quantization_config: fp8 checkpoints are not")
