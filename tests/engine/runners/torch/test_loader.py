"""The torch runner opens models only through models/files: hostile files get `ember show`'s
own one-line error, and the description it maps is the one models/files validated."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ember.engine.runners.torch.loader import open_model
from ember.engine.runners.torch.runner import TorchOptions, TorchRunner
from ember.models.errors import ModelFileError
from ember.models.files.gguf import open_gguf
from ember.models.files.safetensors import open_safetensors
from tests.fixtures.quick_hf import write_tiny_hf
from tests.models.files.badfiles.hostile_hf import HOSTILE, write_hostile

from .helpers import prefill_logits

F32 = TorchOptions(device="cpu", dtype="float32", weight_format="dense", head_format="dense")


def _error(load: Any, path: Path) -> str:
    with pytest.raises(ModelFileError) as info:
        load(path)
    return str(info.value)


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_folders_fail_as_ember_show_does(case: str, tmp_path: Path) -> None:
    folder = write_hostile(tmp_path / "m", case)
    shown = _error(open_safetensors, folder)
    assert _error(lambda p: TorchRunner.load(p, F32), folder) == shown
    assert HOSTILE[case][1] in shown


def test_pickle_named_as_the_model_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "model.bin"
    path.write_bytes(b"\x80\x04K\x01.")
    assert "pickle checkpoint refused" in _error(open_model, path)


def test_description_is_models_files_own(tiny_models: Any) -> None:
    gguf = tiny_models.gguf("gemma3", "Q8_0")
    assert open_model(gguf).hparams == open_gguf(gguf).check_supported()
    folder = tiny_models.hf_dir("qwen2")
    assert open_model(folder).hparams == open_safetensors(folder).check_supported()


def _as_multimodal(folder: Path, out: Path, prefix: str, head: str) -> Path:
    """folder's gemma3 text model saved as Gemma3ForConditionalGeneration would save it."""
    import torch
    from safetensors.torch import load_file, save_file

    shutil.copytree(folder, out)
    text = json.loads((folder / "config.json").read_text())
    config = {
        "architectures": ["Gemma3ForConditionalGeneration"],
        "model_type": "gemma3",
        "text_config": text,
        "vision_config": {"model_type": "siglip_vision_model"},
    }
    (out / "config.json").write_text(json.dumps(config))
    tensors = load_file(str(folder / "model.safetensors"))
    renamed = {
        (head if n == "lm_head.weight" else prefix + n.removeprefix("model.")): t
        for n, t in tensors.items()
    }
    renamed["vision_tower.patch_embedding.weight"] = torch.zeros(4, 4)  # ignored by the decoder
    (out / "model.safetensors").unlink()
    save_file(renamed, str(out / "model.safetensors"))
    return out


@pytest.mark.parametrize(
    ("prefix", "head"),
    [
        ("model.language_model.", "lm_head.weight"),  # transformers 5.x
        ("language_model.model.", "language_model.lm_head.weight"),  # 4.x
    ],
)
def test_multimodal_gemma3_runs_its_text_model(tmp_path: Path, prefix: str, head: str) -> None:
    plain = write_tiny_hf(tmp_path / "plain", "gemma3", tied=False)
    both = _as_multimodal(plain, tmp_path / "mm", prefix, head)
    assert open_safetensors(both).check_supported() == open_safetensors(plain).check_supported()
    ids = [1, 5, 9, 3, 7, 2]
    expected = prefill_logits(TorchRunner.load(plain, F32), ids)
    got = prefill_logits(TorchRunner.load(both, F32), ids)
    np.testing.assert_array_equal(got, expected)
