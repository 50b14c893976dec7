"""Speculative decoding: the verification rule.

A proposer guesses up to k next tokens of a decoding sequence (scheduler.Proposer); the target
scores the last sampled token plus the k drafts in one forward (SeqStep.num_logits = 1 + k), and
the engine keeps the longest verified prefix plus one token of its own. The proposers live in
lookup.py (n-grams of the context) and draft_model.py (a second, smaller model, or a cheaper form
of the target built by self_draft.py); adaptive.py picks k; choice.py loads the one `--draft` names.

Two verification rules, both exact (the output distribution is the target's):
- point-mass drafts (lookup, any greedy draft): engine/step_sampling.py samples each position
  from the target and continues while the sample equals the draft;
- drafts sampled from a distribution q (a draft model at temperature > 0): `verify_sampled`,
  the rejection rule of Leviathan et al. 2023 / Chen et al. 2023.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Sequence as Seq
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from ember.engine.api import SamplingParams
from ember.engine.dry import DryBreakers
from ember.engine.sampling import apply_penalties, candidates

if TYPE_CHECKING:
    pass


__all__ = ["DistributionProposer", "draft_probs", "sampling_probs", "verify_sampled"]


@runtime_checkable
class DistributionProposer(Protocol):
    """A proposer whose drafts were sampled: it tells the verifier what q they came from."""

    def draft_probs(self, seq_id: int) -> np.ndarray | None:
        """(k, vocab) probabilities q of the last proposal's drafts; None = point masses."""
        ...


def draft_probs(proposer: object, seq_id: int) -> np.ndarray | None:
    """q of seq_id's last drafts when its proposer sampled them, else None (point masses)."""
    if isinstance(proposer, DistributionProposer):
        return proposer.draft_probs(seq_id)
    return None


def close_proposer(proposer: object) -> None:
    """Release what a proposer holds (a draft model's runner); no-op for the others."""
    close = getattr(proposer, "close", None)
    if callable(close):
        close()


# ---- the sampling distribution --------------------------------------------------------------
def sampling_probs(
    logits: np.ndarray,
    params: SamplingParams,
    history: Seq[int] = (),
    dry: DryBreakers | None = None,
) -> np.ndarray:
    """The full (vocab,) distribution sample_token draws from (float64; a point mass at T=0)."""
    logits = apply_penalties(np.asarray(logits, dtype=np.float32), history, params, dry)
    probs = np.zeros(logits.shape[0], dtype=np.float64)
    if params.temperature == 0.0:
        probs[int(np.argmax(logits))] = 1.0
        return probs
    ids, kept = candidates(logits, params)
    scaled = kept.astype(np.float64) / params.temperature
    weights = np.exp(scaled - scaled.max())
    probs[ids] = weights / weights.sum()
    return probs


def draw(probs: np.ndarray, rng: np.random.Generator) -> int:
    """One id from a (vocab,) distribution (inverse CDF: one uniform number per draw)."""
    cdf = np.cumsum(probs)
    index = int(np.searchsorted(cdf, rng.random() * cdf[-1], side="right"))
    return min(index, probs.shape[0] - 1)


def _fit(q: np.ndarray, vocab: int) -> np.ndarray:
    """q over the target's vocab (a draft's logits may be padded wider or narrower)."""
    if q.shape[0] == vocab:
        return q
    out = np.zeros(vocab, dtype=np.float64)
    width = min(vocab, q.shape[0])
    out[:width] = q[:width]
    return out


def verify_sampled(
    rows: np.ndarray,
    drafts: list[int],
    q_rows: np.ndarray,
    params: SamplingParams,
    history: Seq[int],
    rng: np.random.Generator,
    mask: Callable[[np.ndarray, list[int]], np.ndarray] | None = None,
    dry: DryBreakers | None = None,
) -> list[int]:
    """Verify drafts sampled from q; return the accepted prefix plus one target-side token.

    rows: target logits (R, vocab) whose last len(drafts) + 1 rows score the drafts' positions
    and the one after them; q_rows: (k, vocab) the draft distributions the drafts came from.
    For each position i, with p = the target's sampling distribution given the kept tokens:
      accept d_i with probability min(1, p(d_i) / q(d_i));
      on rejection, emit one token from normalize(max(0, p - q)) and stop.
    If all k are accepted, emit one more token from p at position k (the "bonus" token).
    Then P(emit x) = q(x) min(1, p(x)/q(x)) + (1 - sum_y min(p(y), q(y))) * residual(x)
                   = min(p(x), q(x)) + max(0, p(x) - q(x)) = p(x): exactly the target's.

    With a constraint, mask(row, emitted) gives the row masked for the position after this
    step's emitted tokens, so p is the masked target. A draft the mask forbids has p(d) = 0 and
    is rejected for certain; the engine cuts such a draft before the forward and passes its q
    as one row more than drafts: that position is then the rejection, a residual draw, which
    keeps the output exactly the masked target's.
    """
    offset = rows.shape[0] - 1 - len(drafts)
    vocab = rows.shape[1]
    out: list[int] = []

    def target(i: int) -> np.ndarray:
        row = rows[offset + i] if mask is None else mask(rows[offset + i], out)
        return sampling_probs(row, params, [*history, *out], dry)

    for i, token in enumerate(drafts):
        p = target(i)
        q = _fit(np.asarray(q_rows[i], dtype=np.float64), vocab)
        # u < p/q  <=>  u * q < p  (no division; q(d) > 0 since d was drawn from q)
        if rng.random() * q[token] < p[token]:
            out.append(token)
            continue
        out.append(_residual_draw(p, q, rng))
        return out
    p = target(len(drafts))
    if q_rows.shape[0] > len(drafts):  # the next draft was cut as forbidden: rejected
        q = _fit(np.asarray(q_rows[len(drafts)], dtype=np.float64), vocab)
        out.append(_residual_draw(p, q, rng))
    else:
        out.append(draw(p, rng))
    return out


def _residual_draw(p: np.ndarray, q: np.ndarray, rng: np.random.Generator) -> int:
    residual = np.maximum(p - q, 0.0)
    # rejection implies p(d) < q(d), so sum(residual) = sum(max(0, q - p)) > 0
    return draw(residual if residual.sum() > 0 else p, rng)


# ---- which proposer --------------------------------------------------------------------------
