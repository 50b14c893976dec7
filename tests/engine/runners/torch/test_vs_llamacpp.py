"""TorchRunner against llama.cpp on the same GGUF, teacher-forced over the same token ids."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ember.engine.api import ModelFiles
from ember.engine.runners.torch.native.compile import _compiler
from ember.engine.runners.torch.runner import TorchOptions, TorchRunner
from tests.conftest import PACKED_CACHE_DIR
from tests.fixtures.llama_reference import llama_logits

from .helpers import prefill_logits

TEXT = Path(__file__).parent / "data" / "english.txt"


def load_starter(model: ModelFiles) -> TorchRunner:
    """The starter on the torch runner, its converted weights from the tests' packed cache."""
    opts = TorchOptions(device="cpu", threads=2, packed_cache_dir=PACKED_CACHE_DIR)
    return TorchRunner.load(model.path, opts, digest=model.digest)


def mean_nll(logits: np.ndarray, ids: list[int]) -> float:
    """Mean negative log-likelihood of ids[1:] under logits[:-1]."""
    x = logits[:-1].astype(np.float64)
    x = x - x.max(-1, keepdims=True)
    logp = x - np.log(np.exp(x).sum(-1, keepdims=True))
    return float(-logp[np.arange(len(ids) - 1), ids[1:]].mean())


@pytest.fixture(scope="module")
def starter_scores(
    starter_gguf: Path, starter_files: ModelFiles
) -> tuple[list[int], np.ndarray, np.ndarray]:
    """(ids, our logits, llama.cpp's logits) over 512 scored tokens of English text."""
    from llama_cpp import Llama

    vocab = Llama(str(starter_gguf), vocab_only=True, verbose=False)
    ids = vocab.tokenize(TEXT.read_text().encode(), add_bos=True)[:513]
    assert len(ids) == 513  # BOS + 512 scored tokens
    expected = llama_logits(starter_gguf, ids)
    runner = load_starter(starter_files)
    return ids, prefill_logits(runner, ids, num_blocks=40), expected


@pytest.mark.model
def test_starter_perplexity_within_1pct_of_llamacpp(
    starter_scores: tuple[list[int], np.ndarray, np.ndarray],
) -> None:
    ids, got, expected = starter_scores
    ppl_ours, ppl_ref = np.exp(mean_nll(got, ids)), np.exp(mean_nll(expected, ids))
    assert abs(ppl_ours / ppl_ref - 1) < 0.01, (ppl_ours, ppl_ref)


@pytest.mark.model
@pytest.mark.xfail(
    _compiler() is None,
    strict=True,
    reason="no C compiler, so torch's kernels: measured 96.3% (bf16 activations, int8g head)",
)
def test_starter_top1_agrees_97pct_with_llamacpp(
    starter_scores: tuple[list[int], np.ndarray, np.ndarray],
) -> None:
    """Measured 97.1%: every position's logits run float32 over dequantized weights, the LM head
    in row chunks (its 8-bit-activation kernel gave 95.9% here; the decode path's 96.5% is
    test_starter_quantized_path_agreement_floor's)."""
    _, got, expected = starter_scores
    agreement = float((got.argmax(-1) == expected.argmax(-1)).mean())
    assert agreement >= 0.97, agreement


@pytest.mark.model
def test_starter_top1_agreement_floor(
    starter_scores: tuple[list[int], np.ndarray, np.ndarray],
) -> None:
    """Regression floor under the measured 97.1% (a wrong layer drops it far below)."""
    _, got, expected = starter_scores
    assert float((got.argmax(-1) == expected.argmax(-1)).mean()) >= 0.96


@pytest.mark.model
def test_starter_quantized_path_agreement_floor(
    starter_files: ModelFiles, starter_scores: tuple[list[int], np.ndarray, np.ndarray]
) -> None:
    """Decode runs the quantized kernels (native: the GGUF blocks with 8-bit activations, like
    llama.cpp), not the prefill's dense weights: scored in 16-token steps it agrees 96.5%
    (measured; one token at a time too) and its perplexity stays within 1% of llama.cpp's."""
    from ember.engine.runners.base import ForwardBatch

    from .helpers import SimpleSeq, scattered_blocks

    ids, _, expected = starter_scores
    runner = load_starter(starter_files)
    runner.init_kv(40, 16)
    seq = SimpleSeq(0, 16, scattered_blocks(40))
    steps = [ids[i : i + 16] for i in range(0, len(ids), 16)]
    got = np.concatenate(
        [runner.forward(ForwardBatch([seq.step(s, num_logits=len(s))]))[0] for s in steps]
    )
    assert float((got.argmax(-1) == expected.argmax(-1)).mean()) >= 0.955
    ppl_ours, ppl_ref = np.exp(mean_nll(got, ids)), np.exp(mean_nll(expected, ids))
    assert abs(ppl_ours / ppl_ref - 1) < 0.01, (ppl_ours, ppl_ref)


# Max |logit difference| / max |logit| per weight format of the tiny GGUFs. llama.cpp rounds the
# activations to 8-bit blocks (Q8_0/Q8_K) before every quantized dot product and we do not, so
# the difference grows with the weight format's coarseness; F16 is exact up to f16 products.
RELATIVE_TOLERANCE = {"F16": 0.01, "Q8_0": 0.03, "Q4_0": 0.05, "Q4_K_M": 0.05, "Q6_K": 0.03}


@pytest.mark.parametrize("qtype", sorted(RELATIVE_TOLERANCE))
@pytest.mark.parametrize("arch", ["llama", "gemma3"])
def test_tiny_quantized_close_to_llamacpp(tiny_models: Any, arch: str, qtype: str) -> None:
    path = tiny_models.gguf(arch, qtype)
    ids = [int(x) for x in np.random.default_rng(3).integers(3, 200, 48)]
    expected = llama_logits(path, ids)
    runner = TorchRunner.load(path, TorchOptions(device="cpu", dtype="float32"))
    got = prefill_logits(runner, ids)
    relative = np.abs(got - expected).max() / np.abs(expected).max()
    assert relative < RELATIVE_TOLERANCE[qtype], relative
