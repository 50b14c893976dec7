"""--kv-cache on the starter model, measured in the runners' real memory: the torch runner's
int8 pools (their tensors' bytes) and llama.cpp's q8_0/q4_0 cells (the K/V bytes llama.cpp
itself serializes for a prompt), against each runner's f16 cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from ember.engine.api import EngineOptions
from ember.engine.runners.base import ForwardBatch, SeqStep

pytestmark = pytest.mark.model

BS = 16


def _options(path: Path, runner: str, cache: str) -> EngineOptions:
    return EngineOptions(model=str(path), runner=runner, device="cpu", threads=2, kv_cache=cache)


def test_torch_q8_pools_hold_about_half_the_bytes(starter_gguf: Path) -> None:
    from ember.engine.runners.torch.runner import TorchRunner

    pool_bytes = {}
    for cache in ("f16", "q8"):
        runner = TorchRunner.load(starter_gguf, _options(starter_gguf, "torch", cache))
        try:
            runner.init_kv(32, BS)
            kv = runner.kv
            assert kv is not None
            tensors = [*kv.k, *kv.v, *kv.k_scale, *kv.v_scale]
            pool_bytes[cache] = sum(t.numel() * t.element_size() for t in tensors)
            # the bytes the engine reports (EngineInfo.kv_cache_bytes) are the pools' own
            assert pool_bytes[cache] == 32 * BS * runner.info.kv_bytes_per_token
            assert runner.info.dtype == ("int8" if cache == "q8" else "float16")
        finally:
            runner.close()
    # int8 codes + one float32 scale per token and head (head_dim 256): (256 + 4) / 512
    assert pool_bytes["q8"] / pool_bytes["f16"] == pytest.approx(260 / 512)


def test_llamacpp_cells_shrink_with_q8_and_q4(starter_gguf: Path) -> None:
    pytest.importorskip("llama_cpp")
    from ember.engine.runners.llamacpp.runner import LlamaCppRunner

    state_bytes = {}
    for cache in ("f16", "q8", "q4"):
        runner = LlamaCppRunner.load(starter_gguf, _options(starter_gguf, "llama.cpp", cache))
        try:
            runner.init_kv(16, BS)
            tokens = runner.tokenizer.encode("The quick brown fox jumps over the lazy dog. " * 4)
            tokens = tokens[: 2 * BS]
            step = SeqStep(1, tokens, list(range(2 * BS)), 0, [0, 1], 1)
            (logits,) = runner.forward(ForwardBatch([step]))
            assert logits.shape == (1, runner.info.vocab_size)
            state_bytes[cache] = len(runner.read_blocks([0, 1]))  # llama.cpp's own K/V bytes
        finally:
            runner.close()
    # q8_0: 34 bytes per 32 values, q4_0: 18 (f16: 64); the records add a small header
    assert 0.50 < state_bytes["q8"] / state_bytes["f16"] < 0.56
    assert 0.26 < state_bytes["q4"] / state_bytes["f16"] < 0.31
