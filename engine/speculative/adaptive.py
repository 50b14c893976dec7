"""Adaptive draft length: draft k tokens only while that beats plain decoding, measured.

Model (i.i.d. acceptance, rate a per drafted token): a step that drafts k tokens yields
    E(a, k) = 1 + a + a^2 + ... + a^k = (1 - a^(k+1)) / (1 - a)   tokens
and costs T(k) = T(0) + k * c seconds, where T(0) is a plain decode step and c the extra cost
of one drafted token (drafting it plus verifying it). Each step picks
    k* = argmax_{0 <= k <= max} E(a, k) / T(k);
k* = 0 turns drafting off for that step. Everything is measured online:
- a: from the previous proposal of the same sequence (its leading drafts that now appear in the
  sequence were accepted; a shorter match means one rejection), as decayed counts per sequence;
- T(0), c: the time from one proposal of a sequence to its next is one engine step; steps that
  drafted nothing update T(0), steps that drafted k update c = (T - T(0)) / k (decayed means).
A plain step is forced now and then (every `probe_every` drafting steps) so T(0) stays fresh,
and while drafting is off a probe every `probe_every` steps re-measures a and c (a proposer
whose guesses cost nothing, such as lookup, also scores a "shadow" guess at every step).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ember.engine.sequence import Sequence


@dataclass
class _Track:
    """The last proposal made for one sequence."""

    start: int  # len(seq.token_ids) when it was made
    drafts: list[int]
    sent: int  # drafts actually sent for verification (0 for a shadow proposal)
    started_s: float
    accepted: float = 0.0  # decayed counts of this sequence's accepted / rejected drafts
    rejected: float = 0.0


@dataclass
class CostModel:
    """Decayed means of a plain step's seconds and the extra seconds per drafted token."""

    decay: float = 0.2
    plain_s: float | None = None
    per_draft_s: float | None = None

    def observe(self, num_drafts: int, seconds: float) -> None:
        """One finished step that verified num_drafts drafts and took seconds."""
        if self.plain_s is not None and seconds > 20 * self.plain_s * (1 + num_drafts):
            return  # the sequence waited (preempted, idle engine): not a step time
        if num_drafts == 0:
            self.plain_s = _mix(self.plain_s, seconds, self.decay)
        elif self.plain_s is not None:
            extra = max(0.0, (seconds - self.plain_s) / num_drafts)
            self.per_draft_s = _mix(self.per_draft_s, extra, self.decay)

    def step_s(self, num_drafts: int) -> float:
        """Predicted seconds of a step with num_drafts drafts (relative units before data)."""
        plain = self.plain_s or 1.0
        # before any drafting step is measured, assume a drafted token costs 10% of a step
        per_draft = self.per_draft_s if self.per_draft_s is not None else 0.1 * plain
        return plain + num_drafts * per_draft


def _mix(old: float | None, new: float, decay: float) -> float:
    return new if old is None else (1 - decay) * old + decay * new


def expected_tokens(rate: float, num_drafts: int) -> float:
    """E(a, k) = sum_{i=0..k} a^i: tokens one step yields with k drafts at acceptance a."""
    return sum(rate**i for i in range(num_drafts + 1))


@dataclass
class AdaptiveDraftLength:
    """Chooses, per sequence and step, how many tokens to draft (0 = plain decoding)."""

    max_tokens: int
    free_guesses: bool = False  # proposals cost nothing (lookup): measure a while off, for free
    probe_every: int = 16
    rate_decay: float = 0.05  # acceptance counts fade over ~20 steps
    prior_rate: float = 0.5  # acceptance assumed before a sequence has any measurement
    enabled: bool = True  # False: always draft the most the scheduler allows
    clock: Callable[[], float] = time.perf_counter
    cost: CostModel = field(default_factory=CostModel)
    _tracks: dict[int, _Track] = field(default_factory=dict)
    _since_plain: int = 0  # drafting steps since the last measured plain step
    _off_steps: int = 0

    def rate(self, seq_id: int) -> float:
        """Measured acceptance of one sequence (with a weak prior)."""
        track = self._tracks.get(seq_id)
        accepted, rejected = (track.accepted, track.rejected) if track else (0.0, 0.0)
        return (accepted + 2 * self.prior_rate) / (accepted + rejected + 2)

    def begin(self, seq: Sequence, limit: int) -> int:
        """Close seq's previous step (measure it) and return how many tokens to draft now."""
        now = self.clock()
        track = self._tracks.get(seq.seq_id)
        if track is not None:
            self._measure(seq, track, now)
        limit = min(limit, self.max_tokens)
        if not self.enabled:
            return limit
        best = self._best(self.rate(seq.seq_id), limit)
        if best > 0:
            self._off_steps = 0
            self._since_plain += 1
            stale = self._since_plain > self.probe_every
            if stale or (self.cost.plain_s is None and self._since_plain > 1):
                self._since_plain = 0
                return 0  # one plain step to measure T(0)
            return best
        self._off_steps += 1
        if self._off_steps % self.probe_every == 0:
            # probe: free guesses already measure a, so re-measure the cost of a full step;
            # otherwise a short step measures a (a stale cost estimate must not keep k at 0)
            return limit if self.free_guesses else min(2, limit)
        return 0

    def record(self, seq: Sequence, drafts: list[int], num_sent: int) -> None:
        """Remember this step's proposal: num_sent drafts went to verification."""
        track = self._tracks.get(seq.seq_id)
        accepted, rejected = (track.accepted, track.rejected) if track else (0.0, 0.0)
        self._tracks[seq.seq_id] = _Track(
            len(seq.token_ids), list(drafts), num_sent, self.clock(), accepted, rejected
        )

    def forget(self, seq_id: int) -> None:
        """Drop a finished sequence's measurements."""
        self._tracks.pop(seq_id, None)

    def _measure(self, seq: Sequence, track: _Track, now: float) -> None:
        new = seq.token_ids[track.start :]
        if not new:
            return  # no step ran for this sequence since (preempted or waiting)
        self.cost.observe(track.sent, now - track.started_s)
        if not track.sent:
            self._since_plain = 0
        if not track.drafts:
            return
        matched = 0
        for draft, token in zip(track.drafts, new, strict=False):
            if draft != token:
                break
            matched += 1
        if track.sent:  # verified: one step yields at most sent + 1 tokens
            matched = min(matched, track.sent)
            rejected = 1.0 if matched < track.sent else 0.0
        else:  # a shadow proposal is scored against the next token only
            matched, rejected = min(matched, 1), 1.0 if matched == 0 else 0.0
        keep = 1 - self.rate_decay
        track.accepted = keep * track.accepted + matched
        track.rejected = keep * track.rejected + rejected

    def _best(self, rate: float, limit: int) -> int:
        if limit <= 0:
            return 0
        speeds = [expected_tokens(rate, k) / self.cost.step_s(k) for k in range(limit + 1)]
        return max(range(limit + 1), key=lambda k: (speeds[k], -k))
