"""DRY penalty (engine/dry.py): hand-computed cases, a brute-force reference, the sampler chain."""

from __future__ import annotations

import numpy as np
import pytest

from ember.engine.api import SamplingParams
from ember.engine.dry import DryBreakers, compile_breakers, dry_penalties, match_lengths
from ember.engine.errors import EngineError
from ember.engine.runners.fake import FakeTokenizer
from ember.engine.sampling import apply_penalties, sample_token

A, B, C, Y, NL = 10, 11, 12, 13, 14
VOCAB = 32


def _dense(history: list[int], params: SamplingParams, breakers: DryBreakers) -> np.ndarray:
    ids, penalties = dry_penalties(history, params, breakers)
    out = np.zeros(VOCAB, dtype=np.float64)
    out[ids] = penalties
    return out


def _params(**kw: object) -> SamplingParams:
    base = {"dry_multiplier": 1.0, "dry_base": 2.0, "dry_allowed_length": 2}
    return SamplingParams(**{**base, **kw})  # type: ignore[arg-type]


def test_llama_cpp_documented_example() -> None:
    # llama.cpp's comment: last tokens "a b c c b c y a b c" have repeat counts
    # 0 0 3 1 0 2 0 0 0 0; "c" would extend the 3-repeat "a b c", "y" the 2-repeat "b c".
    window = [A, B, C, C, B, C, Y, A, B, C]
    js, lengths = match_lengths(np.array(window), cap=100)
    counts = np.zeros(len(window), dtype=int)
    counts[js] = lengths
    assert counts[:-1].tolist() == [0, 0, 3, 1, 0, 2, 0, 0, 0]
    none = DryBreakers.none(VOCAB)
    expected = np.zeros(VOCAB)
    expected[C] = 1.0 * 2.0 ** (3 - 2)
    expected[Y] = 1.0 * 2.0 ** (2 - 2)
    assert np.array_equal(_dense(window, _params(), none), expected)
    expected[B] = 1.0  # allowed length 1: "c" -> "c b" counts too
    expected[C], expected[Y] = 4.0, 2.0
    assert np.array_equal(_dense(window, _params(dry_allowed_length=1), none), expected)


def test_breakers_cap_the_repeat_and_are_never_penalized() -> None:
    breakers = DryBreakers(np.isin(np.arange(VOCAB), [NL]), {})
    history = [A, B, C, NL, A, B, C, NL, A, B]
    free = _dense(history, _params(), DryBreakers.none(VOCAB))
    assert free[C] == 2.0 ** (6 - 2)  # "a b c nl a b" repeats across the newline
    capped = _dense(history, _params(), breakers)
    assert capped[C] == 2.0 ** (2 - 2) and capped[NL] == 0.0  # only "a b" after the last nl
    assert _dense([A, B, NL, A, B, NL], _params(), breakers)[A] == 0.0  # ends on a breaker


def test_multiplier_zero_range_and_short_history_are_off() -> None:
    history = [A, B, C, A, B]
    none = DryBreakers.none(VOCAB)
    assert _dense(history, _params(dry_multiplier=0.0), none).sum() == 0
    assert _dense(history, _params(dry_penalty_last_n=0), none).sum() == 0
    assert _dense(history, _params(dry_penalty_last_n=3), none).sum() == 0  # "c a b": no repeat
    assert _dense([A, B], _params(), none).sum() == 0


def test_exponent_is_clamped_to_a_finite_float32() -> None:
    history = [A] * 400
    out = _dense(history, _params(dry_base=1.75, dry_multiplier=0.8), DryBreakers.none(VOCAB))
    assert np.isfinite(out[A]) and out[A] == pytest.approx(
        0.8 * 1.75 ** int(88.7228391 / np.log(1.75)), rel=1e-5
    )


def _brute_force(history: list[int], params: SamplingParams, single: set[int]) -> np.ndarray:
    """The definition, directly: O(N^2), single-token breakers only."""
    w = history[-params.dry_penalty_last_n :] if params.dry_penalty_last_n > 0 else history
    n = len(w)
    out = np.zeros(VOCAB)
    if n <= params.dry_allowed_length:
        return out
    rep_limit = next((i for i in range(n) if w[n - 1 - i] in single), n)
    if rep_limit < params.dry_allowed_length:
        return out
    best: dict[int, int] = {}
    for j in range(n - 1):
        k = 0
        while k <= j and w[j - k] == w[n - 1 - k]:
            k += 1
        k = min(k, rep_limit)
        if k >= params.dry_allowed_length:
            best[w[j + 1]] = max(best.get(w[j + 1], 0), k)
    for token, length in best.items():
        if token not in single:
            out[token] = params.dry_multiplier * params.dry_base ** (
                length - params.dry_allowed_length
            )
    return out


@pytest.mark.parametrize("seed", range(12))
def test_matches_brute_force_on_random_repetitive_histories(seed: int) -> None:
    rng = np.random.default_rng(seed)
    motif = rng.integers(4, 9, size=int(rng.integers(2, 6))).tolist()
    history: list[int] = []
    while len(history) < 120:
        history += motif if rng.random() < 0.6 else rng.integers(4, 12, size=3).tolist()
    single = {4} if seed % 2 else set()
    breakers = DryBreakers(np.isin(np.arange(VOCAB), list(single)), {})
    params = _params(
        dry_base=1.5,
        dry_allowed_length=int(rng.integers(1, 4)),
        dry_penalty_last_n=int(rng.choice([-1, 50])),
    )
    assert np.allclose(_dense(history, params, breakers), _brute_force(history, params, single))


def test_multi_token_breaker_heads_and_tails() -> None:
    tok = FakeTokenizer()  # byte-level: "ab" is two tokens, so breaker "ab" is head "a" + tail "b"
    compiled = compile_breakers(tok, ("ab", "\n"))
    a, b, nl, x, y = (tok.encode(ch)[0] for ch in "ab\nxy")
    assert compiled.single[nl] and not compiled.single[a] and compiled.tails[a] == ((b,),)
    params = SamplingParams(dry_multiplier=1.0, dry_base=2.0, dry_allowed_length=1)
    history = [a, b, x, y, a, b, x, y]  # "a b x y" repeats; the breaker "ab" leaves "x y"
    ids, penalties = dry_penalties(history, params, compiled)
    assert dict(zip(ids.tolist(), penalties.tolist(), strict=True)) == {a: 2.0 ** (2 - 1)}
    ids, penalties = dry_penalties(history, params, DryBreakers.none(tok.vocab_size))
    assert dict(zip(ids.tolist(), penalties.tolist(), strict=True)) == {a: 2.0 ** (4 - 1)}


def test_sampler_chain_applies_dry_before_greedy_and_leaves_input_alone() -> None:
    logits = np.zeros(VOCAB, dtype=np.float32)
    logits[C], logits[Y] = 1.0, 0.5
    history = [A, B, C, A, B]
    params = _params(temperature=0.0)
    assert sample_token(logits, SamplingParams(), history) == C
    assert sample_token(logits, params, history, dry=DryBreakers.none(VOCAB)) == Y
    out = apply_penalties(logits, history, params)
    assert out[C] == pytest.approx(0.0) and logits[C] == 1.0


def test_dry_params_are_validated() -> None:
    for bad in (
        {"dry_multiplier": -1.0},
        {"dry_base": 0.5},
        {"dry_allowed_length": 0},
        {"dry_penalty_last_n": -2},
        {"dry_sequence_breakers": ("",)},
    ):
        with pytest.raises(EngineError, match=next(iter(bad))):
            SamplingParams(**bad)
