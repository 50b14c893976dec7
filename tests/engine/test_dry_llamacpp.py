"""Ember's DRY against llama.cpp's own DRY sampler (llama-cpp-python) on the starter's vocabulary."""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ember.engine.api import DRY_BREAKERS, SamplingParams
from ember.engine.dry import breakers_for, dry_penalties

TEXT = (
    'Bob said: "the cat sat on the mat." Then Bob said: "the cat sat on the mat." *smiles*\n'
    "The cat sat on the mat. The cat sat on the mat. The cat sat on the mat. The cat sat"
)


def _llama_cpp_penalties(tok: Any, history: list[int], params: SamplingParams) -> np.ndarray:
    import llama_cpp

    breakers = (ctypes.c_char_p * len(params.dry_sequence_breakers))(
        *(b.encode() for b in params.dry_sequence_breakers)
    )
    sampler = llama_cpp.llama_sampler_init_dry(
        tok._vocab,
        params.dry_multiplier,
        params.dry_base,
        params.dry_allowed_length,
        params.dry_penalty_last_n,
        breakers,
        len(params.dry_sequence_breakers),
    )
    try:
        for token in history:
            llama_cpp.llama_sampler_accept(sampler, token)
        data = (llama_cpp.llama_token_data * tok.vocab_size)()
        for i in range(tok.vocab_size):
            data[i].id, data[i].logit, data[i].p = i, 0.0, 0.0
        array = llama_cpp.llama_token_data_array(data, tok.vocab_size, -1, False)
        llama_cpp.llama_sampler_apply(sampler, ctypes.byref(array))
        out = np.zeros(tok.vocab_size, dtype=np.float32)
        for i in range(array.size):
            out[data[i].id] = -data[i].logit
        return out
    finally:
        llama_cpp.llama_sampler_free(sampler)


@pytest.mark.model
@pytest.mark.parametrize(("allowed", "last_n"), [(2, 256), (1, 40), (3, 256)])
def test_dry_equals_llama_cpp(starter_gguf: Path, allowed: int, last_n: int) -> None:
    from ember.models.text.tokenizers.llamacpp import LlamaCppTokenizer

    tok = LlamaCppTokenizer(starter_gguf)
    history = tok.encode(TEXT)
    params = SamplingParams(
        dry_multiplier=0.8,
        dry_base=1.75,
        dry_allowed_length=allowed,
        dry_penalty_last_n=last_n,
        dry_sequence_breakers=DRY_BREAKERS,
    )
    theirs = _llama_cpp_penalties(tok, history, params)
    ids, penalties = dry_penalties(history, params, breakers_for(tok, DRY_BREAKERS))
    ours = np.zeros(tok.vocab_size, dtype=np.float32)
    ours[ids] = penalties
    assert np.count_nonzero(theirs) > 0
    assert np.allclose(ours, theirs, rtol=1e-5, atol=1e-6), np.flatnonzero(ours != theirs)[
        :10
    ].tolist()
