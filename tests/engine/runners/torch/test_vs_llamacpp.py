"""TorchRunner against llama.cpp on the same GGUF, teacher-forced over the same token ids."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ember.engine.api import ModelFiles
from ember.engine.runners.torch.runner import TorchOptions, TorchRunner
from tests.conftest import PACKED_CACHE_DIR
from tests.fixtures.llama_reference import llama_logits
from tests.fixtures.near_tie import STARTER_NEAR_TIE

from .helpers import prefill_logits, prefill_path

TEXT = Path(__file__).parent / "data" / "english.txt"


def load_starter(model: ModelFiles) -> TorchRunner:
    """The starter on the torch runner, its converted weights from the tests' packed cache."""
    opts = TorchOptions(device="cpu", threads=2, packed_cache_dir=PACKED_CACHE_DIR)
    return TorchRunner.load(model.path, opts, digest=model.digest)


def mean_nll(logits: np.ndarray, ids: list[int], rows: int = 32) -> float:
    """Mean negative log-likelihood of ids[1:] under logits[:-1], in float64, a few rows at a
    time: the whole [512, 262144] array in float64 is a gigabyte per temporary, and allocating
    and touching those took most of this module's time (the same sums, 3x slower)."""
    scored = len(ids) - 1
    total = 0.0
    for start in range(0, scored, rows):
        x = logits[start : min(start + rows, scored)].astype(np.float64)
        peak = x.max(-1, keepdims=True)
        log_total = np.log(np.exp(x - peak).sum(-1)) + peak[:, 0]
        chosen = x[np.arange(len(x)), ids[start + 1 : start + 1 + len(x)]]
        total += float((log_total - chosen).sum())
    return total / scored


@pytest.fixture(scope="module")
def starter_runner(starter_files: ModelFiles) -> TorchRunner:
    """One load for the module's tests (each sets up its own KV cache)."""
    return load_starter(starter_files)


@pytest.fixture(scope="module")
def starter_reference(starter_gguf: Path) -> tuple[list[int], np.ndarray]:
    """(ids, llama.cpp's logits) over 512 scored tokens of English text."""
    from llama_cpp import Llama

    vocab = Llama(str(starter_gguf), vocab_only=True, verbose=False)
    ids = vocab.tokenize(TEXT.read_text().encode(), add_bos=True)[:513]
    assert len(ids) == 513  # BOS + 512 scored tokens
    return ids, llama_logits(starter_gguf, ids)


@pytest.fixture(scope="module")
def reference_ppl(starter_reference: tuple[list[int], np.ndarray]) -> float:
    """llama.cpp's perplexity over the scored tokens (every perplexity check compares to it)."""
    ids, expected = starter_reference
    return float(np.exp(mean_nll(expected, ids)))


# A 513-token prefill's linears run natively, as dense float32 matmuls or (on CPUs with bfloat16
# hardware) as bfloat16 matmuls, each chosen by a timing measured on this machine
# (native/choice.py). The two paths agree per product to ~3e-7
# but not in their last bits, and through 18 layers of 8-bit activation steps that moves the
# logits by ~0.2 on average: the same spread as llama.cpp's own one-token vs batched paths (its
# perplexity on this text: 17.204 batched, 17.296 one token at a time, 96.1% top-1 agreement;
# 2026-12-03, AVX2). A per-linear mix landed at 1.26%, past the floor, while each path alone
# is within it (native 0.81%, dense 0.37%), so each path is checked alone, pinned.
def _bf16_hardware() -> bool:
    from ember.engine.runners.torch.native.choice import BF16_FLAGS
    from ember.engine.runners.torch.native.isa import this_cpu

    return bool(BF16_FLAGS & this_cpu().flags)


BF16 = pytest.param(
    "bf16",
    marks=pytest.mark.skipif(
        not _bf16_hardware(), reason="this CPU has no bfloat16 hardware: no bf16 prefill path"
    ),
)


@pytest.fixture(scope="module", params=["native", "dense", BF16])
def starter_scores(
    request: pytest.FixtureRequest,
    starter_reference: tuple[list[int], np.ndarray],
    starter_runner: TorchRunner,
) -> tuple[str, list[int], np.ndarray, np.ndarray]:
    """(prefill path, ids, our logits from one prefill on that path, llama.cpp's logits)."""
    ids, expected = starter_reference
    with prefill_path(starter_runner, request.param):
        got = prefill_logits(starter_runner, ids, num_blocks=40)
    return request.param, ids, got, expected


@pytest.mark.model
def test_starter_perplexity_within_1pct_of_llamacpp(
    starter_scores: tuple[str, list[int], np.ndarray, np.ndarray], reference_ppl: float
) -> None:
    path, ids, got, _ = starter_scores
    ppl_ours, ppl_ref = np.exp(mean_nll(got, ids)), reference_ppl
    assert abs(ppl_ours / ppl_ref - 1) < 0.01, (
        f"{path} prefill, ISA {_isa()}: {ppl_ours} vs {ppl_ref}"
    )


# Top-1 agreement with llama.cpp over the 513 scored positions, measured per ISA path
# (python benchmarks/bench_fidelity.py, and each prompt path pinned as starter_scores pins it;
# agreeing positions in brackets):
#   path                                       prompt (one prefill)   quantized (16-token steps)
#   avx2, AMD EPYC 2 cores, 2026-12-02         0.9630 (494)           0.9649 (495)
#   portable C, same machine (EMBER_ISA)       0.9630 (494)           0.9610 (493)
#   avx2, before one rounding path             0.971                  0.965
#   avx512, 2-core EPYC with VNNI/BF16,        0.9649 (float32 acts)  0.9532 (489)
#     before one rounding path (issue 26)
#   torch kernels (no C compiler)              0.963
#   Intel Xeon, AVX-512 VNNI, against llama.cpp's AVX-512 build (2026-12-05):
#     avx512 and avx2 (identical)              native 0.9376 (481),   0.9552 (490)
#                                              dense 0.9649 (495)
#                                              bf16 0.9415 (483), perplexity 1.0015x
#     portable C                               native 0.9396 (482)    0.9493 (487)
#   same Xeon, prompts' attention fused (SDPA) and the bf16 path's activations unrounded:
#     avx512                                   native 0.9570, dense 0.9473, bf16 0.9570
#                                              (perplexity 1.0065x, 1.0019x, 0.9932x;
#                                              bf16 with Q8_0 weights off it)
#   same Xeon, k-quant blocks summed as exact integers (one fused step per block, the scales'
#   and the mins' parts in two sums as llama.cpp keeps them; 2026-12-06):
#     avx512 and avx2 (identical)              native 0.9591 (492), perplexity 0.9992x
#     portable C                               native 0.9552 (490), perplexity 1.0067x
#     (the same sums in one accumulator missed once at a 1.02-logit gap, position 405, where
#     that variant's hidden state had drifted: mean logit deviation 0.85 there, 0.22 overall)
# The reference moves too: llama.cpp's AVX-512 kernels sum in another order than its AVX2 ones,
# and the same torch path (avx2, native prompt) scored 0.9630 against one and 0.9376 against the
# other. The floor is the lowest measured (0.9376) less the largest spread seen between ISA paths
# of the same code against one reference (0.9649 - 0.9532 = 0.012, six tokens). Every miss must
# also be a near tie of llama.cpp's (tests/fixtures/near_tie.py: at most 0.49 logits measured):
# a wrong layer drops far below the floor and misses at gaps of several logits, and the
# perplexity checks (within 1% of llama.cpp's) are the tight, continuous ones.
TOP1_FLOOR = 0.9376 - (0.9649 - 0.9532)


def _isa() -> str:
    from ember.engine.runners.torch.native.isa import choose

    try:
        return choose().name
    except Exception as exc:  # noqa: BLE001 - for a failure message only
        return f"unknown ({exc})"


def check_agreement(path: str, got: np.ndarray, expected: np.ndarray) -> None:
    agree = got.argmax(-1) == expected.argmax(-1)
    rate = float(agree.mean())
    assert rate >= TOP1_FLOOR, (
        f"{path} path, native ISA {_isa()}: top-1 agreement with llama.cpp {rate:.4f} "
        f"({int(agree.sum())} of {len(agree)}) < floor {TOP1_FLOOR:.4f}"
    )
    top2 = np.sort(expected, axis=-1)[:, -2:]
    gaps = (top2[:, 1] - top2[:, 0])[~agree]  # llama.cpp's own top-1 margin where we differ
    assert not len(gaps) or gaps.max() < STARTER_NEAR_TIE, (
        f"{path} path, native ISA {_isa()}: a top-1 miss where llama.cpp's top two are "
        f"{gaps.max():.3f} logits apart (near-tie bound {STARTER_NEAR_TIE})"
    )


@pytest.mark.model
def test_starter_top1_agreement_floor(
    starter_scores: tuple[str, list[int], np.ndarray, np.ndarray],
) -> None:
    """Every position's logits from one prefill, on each prefill path (dense: float32 matmuls
    over dequantized weights with the kernels' 8-bit activation rounding, the LM head in row
    chunks; native: the GGUF blocks)."""
    path, _, got, expected = starter_scores
    check_agreement(f"prompt ({path})", got, expected)


@pytest.mark.model
def test_starter_quantized_path_agreement_floor(
    starter_runner: TorchRunner,
    starter_reference: tuple[list[int], np.ndarray],
    reference_ppl: float,
) -> None:
    """Decode runs the quantized kernels (native: the GGUF blocks with 8-bit activations, like
    llama.cpp): scored in 16-token steps it stays over TOP1_FLOOR and its perplexity within 1%
    of llama.cpp's."""
    from ember.engine.runners.base import ForwardBatch

    from .helpers import SimpleSeq, scattered_blocks

    ids, expected = starter_reference
    runner = starter_runner
    runner.init_kv(40, 16)
    seq = SimpleSeq(0, 16, scattered_blocks(40))
    steps = [ids[i : i + 16] for i in range(0, len(ids), 16)]
    got = np.concatenate(
        [runner.forward(ForwardBatch([seq.step(s, num_logits=len(s))]))[0] for s in steps]
    )
    check_agreement("quantized", got, expected)
    ppl_ours, ppl_ref = np.exp(mean_nll(got, ids)), reference_ppl
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
