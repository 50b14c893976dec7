"""The torch runner on an accelerator (CUDA or MPS; opt-in: `pytest -m gpu`): logits against
the CPU path, paged against contiguous, CUDA graphs against eager, speculative exactness and
sink eviction through the engine. benchmarks/gpu_check.sh runs these and the timings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from ember.engine.api import EngineOptions, Finished, GenerationRequest, ModelFiles, SamplingParams
from ember.engine.engine import Engine
from ember.engine.runners.base import ForwardBatch
from ember.engine.runners.torch.runner import TorchOptions, TorchRunner

from .helpers import SimpleSeq, greedy, prefill_logits, scattered_blocks

HAS_DEVICE = torch.cuda.is_available() or torch.backends.mps.is_available()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not HAS_DEVICE, reason="no CUDA or MPS device")]

ARCHS = ("llama", "qwen2", "qwen3", "gemma3")
# max |logit difference| / max |logit| against the CPU float32 path: bf16 (fp16 on MPS)
# activations and weights round to 8 (11) significant bits, attention runs in fused kernels
HALF_TOLERANCE = 0.05
FLOAT32_TOLERANCE = 1e-3  # float32 on the device (no TF32): the same math up to sum order


def _device() -> str:
    return "cuda" if torch.cuda.is_available() else "mps"


def _prompt(n: int, seed: int = 5) -> list[int]:
    return [int(x) for x in np.random.default_rng(seed).integers(3, 200, n)]


def _cpu_reference(path: Path, ids: list[int]) -> np.ndarray:
    opts = TorchOptions(device="cpu", dtype="float32", weight_format="dense", head_format="dense")
    return prefill_logits(TorchRunner.load(path, opts), ids)


@pytest.mark.parametrize("arch", ARCHS)
def test_device_logits_match_cpu(tiny_models: Any, arch: str) -> None:
    """Prefill (SDPA) and the decode steps (one batched graph or eager step each) in the
    default half precision against the CPU float32 path."""
    path, ids = tiny_models.gguf(arch, "F32"), _prompt(40)
    expected = _cpu_reference(path, ids)
    runner = TorchRunner.load(path, TorchOptions(device=_device()))
    got_prefill = prefill_logits(runner, ids)
    scale = np.abs(expected).max()
    assert np.abs(got_prefill - expected).max() / scale < HALF_TOLERANCE
    runner.init_kv(32, 4)
    seq = SimpleSeq(0, 4, scattered_blocks(32))
    rows = [runner.forward(ForwardBatch([seq.step(ids[:8])]))[0][-1]]
    rows += [runner.forward(ForwardBatch([seq.step([t])]))[0][-1] for t in ids[8:]]
    assert np.abs(np.stack(rows) - expected[7:]).max() / scale < HALF_TOLERANCE


@pytest.mark.parametrize("arch", ARCHS)
def test_device_float32_matches_cpu_exactly(tiny_models: Any, arch: str) -> None:
    path, ids = tiny_models.gguf(arch, "F32"), _prompt(40)
    expected = _cpu_reference(path, ids)
    opts = TorchOptions(device=_device(), dtype="float32", weight_format="dense")
    got = prefill_logits(TorchRunner.load(path, opts), ids)
    assert np.abs(got - expected).max() < FLOAT32_TOLERANCE


@pytest.mark.parametrize("arch", ["llama", "gemma3"])
def test_device_paged_equals_contiguous(tiny_models: Any, arch: str) -> None:
    runner = TorchRunner.load(tiny_models.gguf(arch, "Q4_0"), TorchOptions(device=_device()))
    prompt = _prompt(20)
    paged = greedy(runner, prompt, 24, block_size=4, num_blocks=32)
    contiguous = greedy(runner, prompt, 24, block_size=64, num_blocks=1)
    assert paged == contiguous


def test_cuda_graph_replay_equals_eager(tiny_models: Any) -> None:
    if not torch.cuda.is_available():
        pytest.skip("CUDA graphs need CUDA")
    from ember.engine.runners.torch.device_decode import decode_batch

    runner = TorchRunner.load(tiny_models.gguf("gemma3", "Q8_0"), TorchOptions(device="cuda"))
    assert runner.graphs is not None
    runner.init_kv(64, 4)
    free = scattered_blocks(64)
    seqs = [SimpleSeq(i, 4, free) for i in range(3)]
    for seq, n in zip(seqs, (5, 17, 30), strict=True):
        runner.forward(ForwardBatch([seq.step(_prompt(n, seed=n))]))
    for token in (11, 12, 13):
        steps = [seq.step([token]) for seq in seqs]
        replayed = runner.graphs.forward(steps)
        assert replayed is not None
        eager = decode_batch(runner, steps)
        for a, b in zip(replayed, eager, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-3)
    assert runner.graphs.graphs  # captured, and reused for the later steps


def _engine(model: ModelFiles, device: str, **options: Any) -> Engine:
    opts = EngineOptions(
        model=model.name, runner="torch", device=device, prefix_disk_bytes=0, **options
    )
    return Engine.load(opts, model)


def _final(engine: Engine, request: GenerationRequest) -> Finished:
    final = list(engine.generate(request))[-1]
    assert isinstance(final, Finished)
    return final


@pytest.mark.model
def test_device_speculative_greedy_equals_plain(starter_files: ModelFiles) -> None:
    """Prompt lookup on the device: the verified output is exactly plain greedy decoding."""
    code = "def area(width, height):\n    return width * height\n\n" * 3
    request = GenerationRequest(
        prompt=f"Repeat:\n{code}",
        sampling=SamplingParams(temperature=0.0, max_tokens=32, ignore_eos=True),
    )
    plain = _final(_engine(starter_files, _device(), ctx=512, draft="none"), request)
    drafted = _final(_engine(starter_files, _device(), ctx=512, draft="lookup"), request)
    assert drafted.token_ids == plain.token_ids
    assert drafted.stats.accepted_tokens > 0


@pytest.mark.model
def test_device_sink_eviction_keeps_generating(starter_files: ModelFiles) -> None:
    engine = _engine(
        starter_files, _device(), ctx=64, block_size=4, sink=4, window=16, prefix_cache=False
    )
    request = GenerationRequest(
        prompt="The rain in Spain falls mainly on the plain, and",
        sampling=SamplingParams(max_tokens=48, ignore_eos=True),
    )
    final = _final(engine, request)
    assert final.stats.evicted_tokens > 0 and final.stats.context_tokens <= 4 + 16 + 4
    assert final.stats.generated_tokens == 48 and len(set(final.token_ids)) > 3
