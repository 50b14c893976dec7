"""Log-probabilities of sampled tokens: the model's raw distribution at each position.

Reported values are log-softmax of the runner's logits for that position, before penalties,
DRY, constraint masks, temperature and top-k/top-p/min-p (what vLLM reports by default), so
they are the same whatever sampling settings chose the token, and the same with and without
speculative drafts (a drafted position is scored from the target's row for it).

For a row of logits x (vocab,):  logprob(t) = x[t] - logsumexp(x),
logsumexp(x) = m + log(sum(exp(x - m))), m = max(x)  (exp in float32, the sum in float64).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Scored:
    """One sampled token's log-probability and the `top` (id, logprob) pairs at its position,
    most likely first (ties: lower id first)."""

    logprob: float
    top: tuple[tuple[int, float], ...] = ()


def score_rows(rows: np.ndarray, tokens: list[int], top_n: int) -> list[Scored]:
    """Score tokens[i] under rows[i] (rows: (len(tokens), vocab) logits), with the top_n most
    likely tokens of each row."""
    if len(tokens) != rows.shape[0]:
        raise ValueError(f"{len(tokens)} tokens for {rows.shape[0]} rows of logits")
    out: list[Scored] = []
    for row, token in zip(rows, tokens, strict=True):
        x = np.asarray(row, dtype=np.float32)
        peak = float(x.max())
        shifted = np.subtract(x, peak)  # one temporary, exp'd in place: 262k-row vocabularies
        lse = peak + float(np.log(np.exp(shifted, out=shifted).sum(dtype=np.float64)))
        out.append(Scored(float(x[token]) - lse, _top(x, top_n, lse)))
    return out


def _top(x: np.ndarray, n: int, lse: float) -> tuple[tuple[int, float], ...]:
    if n <= 0:
        return ()
    n = min(n, x.shape[0])
    kth = np.partition(x, x.shape[0] - n)[x.shape[0] - n]  # the n-th largest logit
    ids = np.flatnonzero(x >= kth)  # the n largest and any tied with the last of them
    ids = ids[np.lexsort((ids, -x[ids]))][:n]  # logit descending, then id ascending
    return tuple((int(i), float(x[i]) - lse) for i in ids)
