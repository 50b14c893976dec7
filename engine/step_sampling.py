"""Sampling one forward's rows for one sequence: a plain sample, or draft verification (the
exact rules of speculative/verify.py) under the request's constraint, and the logprobs of
what was sampled when the request asked for them. The Engine calls these after each forward.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ember.engine.logprobs import Scored, score_rows
from ember.engine.request_state import RequestState
from ember.engine.sampling import sample_token
from ember.engine.sequence import Sequence
from ember.engine.speculative.verify import draft_probs, verify_sampled


def sample_step(
    seq: Sequence, state: RequestState, rows: np.ndarray, drafts: list[int], proposer: object
) -> list[int]:
    """The tokens one forward gives seq: one sample, or the verified drafts plus one."""
    # Sample each position in turn; keep going while the sample equals the draft. For a
    # point-mass proposer this is exact speculative sampling (accept with p(d), else a draw
    # from p without d); greedy gives plain greedy's tokens. A constraint masks every row
    # first (as if this step's earlier tokens were accepted), so p is the masked target; a
    # spent reasoning budget masks the same way (engine/reasoning_budget.py: a forced token).
    cut, state.draft_cut = state.draft_cut, None
    sampled_q = drafts or cut == 0
    q_rows = draft_probs(proposer, seq.seq_id) if sampled_q else None
    budget = state.reasoning.mask if state.reasoning is not None else None
    if state.constraint is None:
        return _sample_rows(seq, state, rows, drafts, q_rows, budget)
    if q_rows is not None and cut == len(drafts):
        q_rows = q_rows[: len(drafts) + 1]  # the cut draft's q: its position is a rejection
    elif q_rows is not None:
        q_rows = q_rows[: len(drafts)]
    with state.constraint.lookahead() as lookahead:
        return _sample_rows(seq, state, rows, drafts, q_rows, _both(lookahead.mask, budget))


Mask = Callable[[np.ndarray, list[int]], np.ndarray]


def _both(constraint: Mask, budget: Mask | None) -> Mask:
    """The constraint's mask, then the reasoning budget's forced token (if any)."""
    if budget is None:
        return constraint
    return lambda row, emitted: budget(constraint(row, emitted), emitted)


def _sample_rows(
    seq: Sequence,
    state: RequestState,
    rows: np.ndarray,
    drafts: list[int],
    q_rows: np.ndarray | None,
    mask: Callable[[np.ndarray, list[int]], np.ndarray] | None,
) -> list[int]:
    if q_rows is not None:  # sampled drafts: the min(1, p/q) rule (speculative/verify.py)
        return verify_sampled(
            rows,
            drafts,
            q_rows,
            seq.sampling,
            seq.token_ids,
            state.rng,
            mask=mask,
            dry=state.dry,
        )
    samples: list[int] = []
    offset = rows.shape[0] - 1 - len(drafts)
    for i in range(len(drafts) + 1):
        history = seq.token_ids + samples
        row = rows[offset + i] if mask is None else mask(rows[offset + i], samples)
        token = sample_token(row, seq.sampling, history, state.rng, state.dry)
        samples.append(token)
        if i == len(drafts) or token != drafts[i]:
            break
    return samples


def score_samples(
    seq: Sequence, rows: np.ndarray, drafts: list[int], samples: list[int]
) -> list[Scored | None]:
    """Logprobs of samples when the request asked: samples[i] came from the target's row
    offset + i (plain sampling and both verification rules), so drafted and undrafted
    decoding report the same values."""
    if not seq.sampling.logprobs:
        return [None] * len(samples)
    offset = rows.shape[0] - 1 - len(drafts)
    window = rows[offset : offset + len(samples)]
    return list(score_rows(window, samples, seq.sampling.top_logprobs))
