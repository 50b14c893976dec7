from __future__ import annotations

import numpy as np
import pytest

from ember.engine.api import SamplingParams
from ember.engine.sampling import (
    apply_penalties,
    candidates,
    log_softmax,
    make_generator,
    sample_token,
)


def _logits() -> np.ndarray:
    return np.array([1.0, 3.0, 2.0, -1.0, 0.5, 2.9], dtype=np.float32)


def test_temperature_zero_is_exact_argmax() -> None:
    assert sample_token(_logits(), SamplingParams(temperature=0.0)) == 1
    ties = np.array([0.0, 5.0, 5.0], dtype=np.float32)
    assert sample_token(ties, SamplingParams()) == 1  # lowest id wins a tie


def test_repetition_penalty_follows_llama_cpp_rule() -> None:
    params = SamplingParams(repeat_penalty=2.0)
    out = apply_penalties(_logits(), [1, 3], params)
    assert out[1] == pytest.approx(1.5)  # positive: divided
    assert out[3] == pytest.approx(-2.0)  # negative: multiplied
    assert out[2] == pytest.approx(2.0)  # untouched
    assert sample_token(_logits(), params, history=[1]) == 5  # greedy sees the penalty


def test_presence_frequency_and_last_n_window() -> None:
    params = SamplingParams(presence_penalty=0.5, frequency_penalty=0.25, penalty_last_n=3)
    out = apply_penalties(_logits(), [2, 2, 2, 4, 4], params)
    assert out[2] == pytest.approx(2.0 - 0.25 - 0.5)  # only one 2 inside the last 3
    assert out[4] == pytest.approx(0.5 - 0.5 - 0.5)
    untouched = [0, 1, 3, 5]  # ids outside the window or never seen keep their logits
    np.testing.assert_array_equal(out[untouched], _logits()[untouched])


def test_penalties_off_leave_logits_unchanged() -> None:
    np.testing.assert_array_equal(
        apply_penalties(_logits(), [1, 1, 2], SamplingParams()), _logits()
    )
    window_off = SamplingParams(repeat_penalty=2.0, presence_penalty=1.0, penalty_last_n=0)
    np.testing.assert_array_equal(apply_penalties(_logits(), [1, 2], window_off), _logits())


def test_top_k_top_p_min_p_filters() -> None:
    ids, _ = candidates(_logits(), SamplingParams(temperature=1.0, top_k=2))
    assert list(ids) == [1, 5]
    probs = np.exp(_logits()) / np.exp(_logits()).sum()
    ids, _ = candidates(_logits(), SamplingParams(temperature=1.0, top_p=0.5))
    assert probs[ids].sum() >= 0.5 and probs[ids[:-1]].sum() < 0.5
    ids, _ = candidates(_logits(), SamplingParams(temperature=1.0, min_p=0.3))
    assert set(ids) == {i for i in range(6) if probs[i] >= 0.3 * probs.max()}


def test_seed_reproducible_and_distribution_matches() -> None:
    params = SamplingParams(temperature=1.0, seed=7)
    a = [sample_token(_logits(), params, rng=make_generator(7)) for _ in range(3)]
    b = [sample_token(_logits(), params, rng=make_generator(7)) for _ in range(3)]
    assert a == b
    rng = make_generator(0)
    draws = np.bincount(
        [sample_token(_logits(), SamplingParams(temperature=1.0), rng=rng) for _ in range(4000)],
        minlength=6,
    )
    expected = np.exp(_logits()) / np.exp(_logits()).sum()
    assert np.abs(draws / 4000 - expected).max() < 0.03


def test_temperature_sharpens() -> None:
    rng = make_generator(1)
    cold = [sample_token(_logits(), SamplingParams(temperature=0.01), rng=rng) for _ in range(200)]
    assert cold.count(1) == 200  # 3.0 vs 2.9 at T=0.01: odds e^10


def test_log_softmax_rows_sum_to_one() -> None:
    rows = log_softmax(np.stack([_logits(), _logits() * 2]))
    assert np.allclose(np.exp(rows).sum(axis=-1), 1.0)


def test_top_k_ids_equal_a_full_stable_sort() -> None:
    """The two-pass top-k picks exactly what sorting the whole row would: on 262k-entry rows
    (the starter's vocabulary) and small ones, with ties, masked rows (-inf but for a few),
    constant rows and the largest logits at either end."""
    from ember.engine.sampling import top_k_ids

    rng = np.random.default_rng(7)
    for trial in range(240):
        n = 262_144 + int(rng.integers(0, 3000)) if trial % 3 == 0 else int(rng.integers(1, 9000))
        row = rng.standard_normal(n).astype(np.float32)
        if trial % 4 == 0:
            row = np.round(row * 2) / 2  # many equal logits
        if trial % 5 == 0:
            row[rng.random(n) < rng.choice([0.5, 0.99, 0.9999])] = -np.inf
        if trial % 7 == 0:
            row[:] = 1.0
        if trial % 11 == 0:
            row = np.sort(row)
        if trial % 13 == 0:
            row = np.sort(row)[::-1].copy()
        k = int(rng.integers(1, min(n, 300) + 1))
        expected = np.argsort(-row, kind="stable")[:k]
        np.testing.assert_array_equal(top_k_ids(row, k), expected, err_msg=f"n={n} k={k}")
