"""AdaptiveDraftLength (speculative/adaptive.py): k follows measured acceptance and step costs."""

from __future__ import annotations

import math

from ember.engine.sequence import Sequence
from ember.engine.speculative.adaptive import AdaptiveDraftLength, CostModel, expected_tokens


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def simulate(
    controller: AdaptiveDraftLength,
    clock: Clock,
    *,
    accept: int,
    plain_s: float,
    per_draft_s: float,
    steps: int,
    guess: bool = True,
) -> list[int]:
    """Drive the controller like a proposer: each step drafts k guesses, `accept` of them right."""
    seq = Sequence([4, 5, 6])
    chosen = []
    for _ in range(steps):
        k = controller.begin(seq, 4)
        chosen.append(k)
        guesses = [7] * 4 if guess else []
        controller.record(seq, guesses, k)
        kept = min(k, accept)
        # the step: `kept` drafts match, then one token of the target's own (never a 7)
        seq.token_ids += [7] * kept + [8]
        clock.now += plain_s + k * per_draft_s
    return chosen


def test_expected_tokens() -> None:
    assert expected_tokens(0.0, 4) == 1.0
    assert expected_tokens(1.0, 4) == 5.0
    assert math.isclose(expected_tokens(0.5, 2), 1.75)


def test_good_acceptance_drafts_the_most() -> None:
    clock = Clock()
    controller = AdaptiveDraftLength(4, clock=clock)
    chosen = simulate(controller, clock, accept=4, plain_s=0.02, per_draft_s=0.002, steps=60)
    assert chosen[-10:].count(4) >= 9  # drafting at full length (a plain probe now and then)
    assert controller.cost.plain_s is not None and math.isclose(controller.cost.plain_s, 0.02)
    assert controller.cost.per_draft_s is not None
    assert math.isclose(controller.cost.per_draft_s, 0.002, rel_tol=1e-6)


def test_useless_drafts_turn_drafting_off() -> None:
    # every guess wrong and a draft costs half a step (a draft model): drafting only slows down
    clock = Clock()
    controller = AdaptiveDraftLength(4, clock=clock)
    chosen = simulate(controller, clock, accept=0, plain_s=0.02, per_draft_s=0.01, steps=80)
    tail = chosen[-32:]
    assert tail.count(0) >= 30  # off, except a short probe every 16 steps
    assert max(tail) <= 2


def test_cheap_guesses_with_middling_acceptance_use_a_middle_length() -> None:
    # one right guess per step: the second and later drafts are wasted verification work
    clock = Clock()
    controller = AdaptiveDraftLength(4, clock=clock)
    chosen = simulate(controller, clock, accept=1, plain_s=0.02, per_draft_s=0.008, steps=120)
    assert 1 <= sorted(chosen[-20:])[10] <= 2


def test_free_guesses_measure_acceptance_while_off() -> None:
    # lookup: shadow proposals (not verified) still tell whether turning drafting on would pay
    clock = Clock()
    controller = AdaptiveDraftLength(4, clock=clock, free_guesses=True)
    controller.cost = CostModel(plain_s=0.02, per_draft_s=0.02)  # drafts as dear as a step
    seq = Sequence([4, 5, 6])
    for _ in range(15):  # every guess right, nothing verified (a probe comes at step 16)
        k = controller.begin(seq, 4)
        controller.record(seq, [9], k)
        seq.token_ids += [9] * min(k, 1) + [9]
        clock.now += 0.02
    assert controller.rate(seq.seq_id) > 0.9
    controller.cost = CostModel(plain_s=0.02, per_draft_s=0.001)
    assert controller.begin(seq, 4) == 4


def test_disabled_controller_always_drafts_the_limit() -> None:
    controller = AdaptiveDraftLength(4, enabled=False)
    assert controller.begin(Sequence([1, 2]), 3) == 3


def test_probes_never_exceed_the_cap() -> None:
    clock = Clock()
    controller = AdaptiveDraftLength(1, clock=clock, free_guesses=True)
    chosen = simulate(controller, clock, accept=0, plain_s=0.02, per_draft_s=0.05, steps=40)
    assert max(chosen) == 1 and chosen.count(0) > 30
