"""TorchRunner against Hugging Face transformers (float32) on tiny random models."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ember.engine.errors import EngineError
from ember.engine.runners.torch.runner import TorchOptions, TorchRunner

from .helpers import decode_logits, greedy, prefill_logits
from .tiny_hf import ARCHS, VOCAB, hf_logits, make_hf_model

F32 = TorchOptions(device="cpu", dtype="float32", weight_format="dense", head_format="dense")
PROMPT = [int(x) for x in np.random.default_rng(7).integers(0, VOCAB, 64)]
TOLERANCE = 1e-3  # max |logit difference| in float32


@pytest.fixture(scope="module", params=ARCHS)
def tiny(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, Path, np.ndarray]:
    """(arch, HF folder, transformers' logits over PROMPT)."""
    folder = tmp_path_factory.mktemp(f"hf_{request.param}")
    model = make_hf_model(request.param, folder)
    return request.param, folder, hf_logits(model, PROMPT).numpy()


def test_prefill_matches_transformers(tiny: tuple[str, Path, np.ndarray]) -> None:
    arch, folder, expected = tiny
    runner = TorchRunner.load(folder, F32)
    assert runner.info.architecture == arch
    got = prefill_logits(runner, PROMPT)
    assert got.shape == expected.shape
    assert np.abs(got - expected).max() < TOLERANCE


def test_decode_matches_transformers(tiny: tuple[str, Path, np.ndarray]) -> None:
    _, folder, expected = tiny
    runner = TorchRunner.load(folder, F32)
    got = decode_logits(runner, PROMPT, prefill=5, block_size=4)
    assert np.abs(got - expected[4:]).max() < TOLERANCE


def test_paged_greedy_equals_contiguous(tiny: tuple[str, Path, np.ndarray]) -> None:
    _, folder, _ = tiny
    runner = TorchRunner.load(folder, F32)
    paged = greedy(runner, PROMPT[:20], 24, block_size=4, num_blocks=32)
    contiguous = greedy(runner, PROMPT[:20], 24, block_size=64, num_blocks=1)
    assert paged == contiguous


def test_unsupported_architecture_names_supported_list(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"model_type": "mamba"}')
    with pytest.raises(EngineError, match="mamba.*llama, qwen2, qwen3, gemma3"):
        TorchRunner.load(tmp_path, F32)
