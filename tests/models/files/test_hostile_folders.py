"""Hostile safetensors folders: `ember show`'s readers refuse each with one line naming the
file and the field (the loaders' tests check they give the very same line)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ember.models.errors import ModelFileError
from ember.models.files.inspect import inspect_model
from ember.models.files.safetensors import open_safetensors
from tests.models.files.badfiles.hostile_hf import HOSTILE, write_hostile


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_folder_is_one_clean_line(case: str, tmp_path: Path) -> None:
    folder = write_hostile(tmp_path / "m", case)
    for read in (open_safetensors, inspect_model):
        with pytest.raises(ModelFileError) as info:
            read(folder)
        message = str(info.value)
        assert HOSTILE[case][1] in message and "\n" not in message, message
        assert message.startswith(("m/", "model.safetensors: ")), message
