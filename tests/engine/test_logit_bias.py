"""Logit bias (issue 23 part 4): added before penalties and temperature, -100 bans a token, the
same in plain sampling and in speculative verification's distribution; text entries become
their token ids, ids past the vocabulary are refused."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ember.engine.api import SamplingParams
from ember.engine.errors import EngineError
from ember.engine.logit_bias import resolve_logit_bias
from ember.engine.runners.fake import FakeTokenizer
from ember.engine.sampling import apply_penalties, sample_token
from ember.engine.speculative.verify import sampling_probs

LOGITS = np.array([1.0, 3.0, 2.0, -1.0, 0.5, 2.9], dtype=np.float32)


def test_a_ban_moves_greedy_to_the_next_best_and_a_boost_wins() -> None:
    assert sample_token(LOGITS, SamplingParams()) == 1
    banned = SamplingParams(logit_bias=((1, -100.0),))
    assert sample_token(LOGITS, banned) == 5
    assert sample_token(LOGITS, SamplingParams(logit_bias=((1, -math.inf),))) == 5  # false
    assert sample_token(LOGITS, SamplingParams(logit_bias=((3, 4.5),))) == 3
    assert LOGITS[1] == 3.0  # the runner's array is never written


def test_a_banned_token_is_never_drawn_and_verification_sees_the_same_distribution() -> None:
    params = SamplingParams(temperature=1.0, seed=3, logit_bias=((1, -100.0), (2, 1.0)))
    rng = np.random.default_rng(3)
    draws = {sample_token(LOGITS, params, rng=rng) for _ in range(300)}
    assert 1 not in draws and 2 in draws
    probs = sampling_probs(LOGITS, params)
    assert probs[1] == 0.0
    biased = apply_penalties(LOGITS, [], params)
    expected = np.exp(biased - biased.max())
    assert probs == pytest.approx(expected / expected.sum())


def test_texts_become_their_token_ids_and_ids_are_checked_against_the_vocabulary() -> None:
    tokenizer = FakeTokenizer()  # byte-level: "ab" is two ids
    params = SamplingParams(logit_bias=((7, 2.0),), logit_bias_text=(("ab", -100.0),))
    resolved = resolve_logit_bias(params, tokenizer, tokenizer.vocab_size)
    ids = tokenizer.encode("ab")
    assert resolved.logit_bias == ((7, 2.0), (ids[0], -100.0), (ids[1], -100.0))
    assert resolved.logit_bias_text == ()
    with pytest.raises(EngineError, match="past the vocabulary"):
        resolve_logit_bias(SamplingParams(logit_bias=((10**6, 1.0),)), tokenizer, 300)


@pytest.mark.parametrize(
    "bias", [{"logit_bias": ((1, 101.0),)}, {"logit_bias": ((-1, 1.0),)},
             {"logit_bias": ((1, math.nan),)}, {"logit_bias_text": (("", 1.0),)}],
)  # fmt: skip
def test_bad_entries_are_refused_by_name(bias: dict[str, object]) -> None:
    with pytest.raises(EngineError, match="sampling logit_bias"):
        SamplingParams(**bias)  # type: ignore[arg-type]


def test_a_remote_server_gets_the_bias_in_its_own_forms() -> None:
    from ember.engine.remote.sse import sampling_fields

    ids = SamplingParams(logit_bias=((5, 2.0), (9, -math.inf)))
    assert sampling_fields(ids)["logit_bias"] == {"5": 2.0, "9": -100.0}  # OpenAI's object
    texts = SamplingParams(logit_bias=((5, 2.0),), logit_bias_text=(("hi", -100.0),))
    assert sampling_fields(texts)["logit_bias"] == [[5, 2.0], ["hi", -100.0]]  # llama-server
    assert "logit_bias" not in sampling_fields(SamplingParams())
