"""Next-token sampling: penalties, DRY, top-k, top-p, min-p, temperature, seeded draws (numpy).

The order follows llama.cpp's default chain: logit bias -> penalties -> DRY -> top-k -> top-p ->
min-p -> temperature -> draw. Temperature 0 is an exact argmax of the penalized logits (lowest id on ties).
`apply_penalties` is the one place penalties happen: plain sampling and speculative verification
(speculative/verify.py) both go through it, so drafts are judged by the same distribution.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence as Seq

import numpy as np

from ember.engine.api import SamplingParams
from ember.engine.dry import DryBreakers, dry_penalties


def make_generator(seed: int | None) -> np.random.Generator:
    """A per-request random generator (seeded: the same draws every run)."""
    return np.random.default_rng(seed)


def apply_penalties(
    logits: np.ndarray,
    history: Seq[int],
    params: SamplingParams,
    dry: DryBreakers | None = None,
) -> np.ndarray:
    """The request's logit bias, repetition (llama.cpp's rule), presence and frequency
    penalties, then DRY.

    logit bias: logit[t] += bias for each (t, bias); a bias of -100 bans t (logit -inf).

    For each distinct token t among the last penalty_last_n ids, seen c times:
      repetition: logit /= r if logit > 0 else logit *= r
      then:       logit -= c * frequency_penalty + presence_penalty
    DRY (engine/dry.py) then lowers tokens that would extend a repeat; dry: the request's
    compiled sequence breakers (None = no breakers).
    """
    logits = apply_logit_bias(logits, params.logit_bias)
    logits = _repetition_penalties(logits, history, params)
    if params.dry_multiplier > 0.0 and history:
        breakers = dry if dry is not None else DryBreakers.none(logits.shape[0])
        ids, penalties = dry_penalties(history, params, breakers)
        if ids.size:
            logits = logits.copy()  # never write into the runner's array
            logits[ids] -= penalties
    return logits


def apply_logit_bias(logits: np.ndarray, bias: Seq[tuple[int, float]]) -> np.ndarray:
    """logits plus each (id, bias); -100 or less bans the id (OpenAI's and llama.cpp's
    meaning). A copy when anything changes: never write into the runner's array."""
    if not bias:
        return logits
    out = logits.copy()
    for token_id, value in bias:
        out[token_id] = -np.inf if value <= -100.0 else out[token_id] + value
    return out


def _repetition_penalties(
    logits: np.ndarray, history: Seq[int], params: SamplingParams
) -> np.ndarray:
    active = params.repeat_penalty != 1.0 or params.presence_penalty or params.frequency_penalty
    if not active or params.penalty_last_n == 0 or not history:
        return logits
    counts = Counter(history[-params.penalty_last_n :])
    ids = np.fromiter((t for t in counts if 0 <= t < logits.shape[0]), dtype=np.int64)
    if ids.size == 0:
        return logits
    seen = np.array([counts[int(t)] for t in ids], dtype=np.float32)
    out = logits.copy()
    vals = out[ids]
    if params.repeat_penalty != 1.0:
        vals = np.where(vals > 0, vals / params.repeat_penalty, vals * params.repeat_penalty)
    vals = vals - seen * params.frequency_penalty - (seen > 0) * params.presence_penalty
    out[ids] = vals
    return out


def _softmax(x: np.ndarray) -> np.ndarray:
    z = np.exp(x - x.max())
    return z / z.sum()


TOP_K_GROUPS = 1024  # at least: groups whose maxima bound the top-k from below


def top_k_ids(logits: np.ndarray, k: int) -> np.ndarray:
    """The ids of the k largest logits, largest first, equal logits by lowest id: exactly
    `np.argsort(-logits, kind="stable")[:k]`, without sorting or partitioning the whole row
    (a partition of a 262k-entry row costs milliseconds a token).

    The row's first rows * groups logits, read as a (rows, groups) matrix, give one maximum per
    column (group). floor = the k-th largest of those maxima: at least k logits reach it, so the
    top k are the logits above it and, if those are fewer than k, the lowest ids equal to it.
    Two passes over the row (the maxima, then the compare) instead of a partition."""
    vocab = logits.shape[0]
    groups = max(TOP_K_GROUPS, 4 * k)
    rows = vocab // groups
    if rows < 2:
        return np.argsort(-logits, kind="stable")[:k]
    maxima = logits[: rows * groups].reshape(rows, groups).max(axis=0)
    floor = np.partition(maxima, groups - k)[groups - k]
    ids = np.flatnonzero(logits >= floor)  # ascending, at least k
    if ids.size > 4 * k:  # many tie at the floor (a masked row: -inf but for a few)
        above = np.flatnonzero(logits > floor)
        need = k - above.size
        if need > 0:  # all of those, then the lowest ids at the floor (within the first ones)
            head = ids[: need + above.size]
            above = np.sort(np.concatenate((above, head[logits[head] == floor][:need])))
        ids = above
    return ids[np.argsort(-logits[ids], kind="stable")[:k]]


def candidates(logits: np.ndarray, params: SamplingParams) -> tuple[np.ndarray, np.ndarray]:
    """Token ids kept by top-k, top-p and min-p, and their logits, most likely first (equal
    logits: lowest id first)."""
    vocab = logits.shape[0]
    if 0 < params.top_k < vocab:
        ids = top_k_ids(logits, params.top_k)
    else:
        ids = np.argsort(-logits, kind="stable")  # descending
    kept = logits[ids]
    if params.top_p < 1.0:
        probs = _softmax(kept)
        # smallest prefix whose mass reaches top_p (at least one token)
        cut = int(np.searchsorted(np.cumsum(probs), params.top_p)) + 1
        ids, kept = ids[:cut], kept[:cut]
    if params.min_p > 0.0:
        probs = _softmax(kept)
        keep = probs >= params.min_p * probs[0]
        ids, kept = ids[keep], kept[keep]
    return ids, kept


def sample_token(
    logits: np.ndarray,
    params: SamplingParams,
    history: Seq[int] = (),
    rng: np.random.Generator | None = None,
    dry: DryBreakers | None = None,
) -> int:
    """One next-token id from float logits of shape (vocab,)."""
    logits = apply_penalties(np.asarray(logits, dtype=np.float32), history, params, dry)
    if params.temperature == 0.0:
        return int(np.argmax(logits))
    ids, kept = candidates(logits, params)
    probs = _softmax(kept.astype(np.float64) / params.temperature)
    rng = rng if rng is not None else make_generator(None)
    # inverse-CDF draw: one uniform number per token keeps seeded runs reproducible
    index = int(np.searchsorted(np.cumsum(probs), rng.random() * probs.sum(), side="right"))
    return int(ids[min(index, ids.size - 1)])


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise log-probabilities (perplexity scoring), float64 for a stable sum."""
    x = np.asarray(logits, dtype=np.float64)
    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
