"""The llama.cpp runner checks a GGUF with models/files' bounded parser before llama.cpp reads
it: a malformed file gets `ember show`'s one-line error, not llama.cpp's own verdict."""

from __future__ import annotations

from pathlib import Path

import pytest

from ember.engine.runners.llamacpp.runner import LlamaCppRunner
from ember.models.errors import ModelFileError
from ember.models.files.gguf import open_gguf
from tests.fixtures.quick_gguf import write_tiny_gguf
from tests.models.files.badfiles.corpus import BAD_CASES
from tests.models.files.badfiles.layout import build, spec_from_file


@pytest.mark.parametrize("case", ["no_block_count", "norm_eps_nan", "tensor_past_end"])
def test_bad_gguf_fails_as_ember_show_does(case: str, tmp_path: Path) -> None:
    spec = spec_from_file(write_tiny_gguf(tmp_path / "ok.gguf", "llama"))
    edit, fragment = BAD_CASES[case]
    edit(spec)
    path = tmp_path / f"{case}.gguf"
    path.write_bytes(build(spec)[0])
    with pytest.raises(ModelFileError) as shown:
        open_gguf(path)
    with pytest.raises(ModelFileError) as loaded:
        LlamaCppRunner.load(path)
    assert str(loaded.value) == str(shown.value) and fragment in str(shown.value)
