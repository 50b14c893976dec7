"""Greedy decode speed of loaded runners, side by side: what `--runner auto` decides with.

Each runner gets a small KV cache, one untimed warm-up (a PROMPT_TOKENS-token prompt and one
greedy step: pages the weights in, builds graphs, measures kernels), then rounds of
DECODE_TOKENS greedy steps each, the first runner alternating between rounds, so a busy second
on a shared machine falls on both. At least MIN_ROUNDS rounds, more (up to MAX_ROUNDS) while the
rounds so far took under BUDGET_S. Per round, the ratio of the two speeds; the median of those
ratios is steadier than a ratio of medians when the machine's load drifts.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ember.engine.runners.base import ForwardBatch, SeqStep

if TYPE_CHECKING:
    from ember.engine.runners.base import Runner

Clock = Callable[[], float]

PROMPT_TOKENS = 1
DECODE_TOKENS = 4
MIN_ROUNDS, MAX_ROUNDS = 3, 8
BUDGET_S = 1.0
BLOCK_SIZE = 16
SEQ_ID = 0
PROMPT_TEXT = "The river bends past the old mill, where the water turns the wheel and the stones"


@dataclass(frozen=True)
class DecodeTiming:
    tok_s: dict[str, float]  # median per runner
    ratio: float  # median over rounds of second / first runner's tok/s (torch / llama.cpp)
    rounds: int
    tokens_per_round: int


class _Greedy:
    """One runner decoding one sequence greedily from a short prompt."""

    def __init__(self, runner: Runner, prompt: list[int], capacity: int) -> None:
        self.runner = runner
        num_blocks = -(-capacity // BLOCK_SIZE)
        runner.init_kv(num_blocks, BLOCK_SIZE)
        self.table = list(range(num_blocks))
        self.pos = 0
        self.token = self._forward(prompt)

    def _forward(self, ids: list[int]) -> int:
        step = SeqStep(SEQ_ID, ids, list(range(self.pos, self.pos + len(ids))), self.pos,
                       self.table)  # fmt: skip
        logits = self.runner.forward(ForwardBatch([step], borrow_logits=True))[0]
        self.pos += len(ids)
        return int(logits[-1].argmax())

    def decode(self, steps: int, clock: Clock) -> float:
        """tok/s of steps greedy steps."""
        start = clock()
        for _ in range(steps):
            self.token = self._forward([self.token])
        return steps / max(clock() - start, 1e-9)


def prompt_ids(runner: Runner) -> list[int]:
    """PROMPT_TOKENS ids of plain text in the model's own vocabulary."""
    ids: list[int] = []
    while len(ids) < PROMPT_TOKENS:
        ids += runner.tokenizer.encode(PROMPT_TEXT) or [0]
    return ids[:PROMPT_TOKENS]


def time_decode(
    runners: dict[str, Runner],
    progress: Callable[[int, int], None] | None = None,
    clock: Clock | None = None,
) -> DecodeTiming:
    """Both runners' greedy decode tok/s (the dict's order: first, second) and the median of
    per-round second/first ratios. progress(done, total) hears each round."""
    import time

    clock = clock or time.perf_counter
    names = list(runners)
    if len(names) != 2:
        raise ValueError("time_decode compares two runners")
    tell = progress or (lambda done, total: None)
    total = MAX_ROUNDS + 1
    tell(0, total)
    capacity = PROMPT_TOKENS + 1 + MAX_ROUNDS * DECODE_TOKENS
    prompt = prompt_ids(runners[names[0]])  # one GGUF, one vocabulary (a lazy one stays unread)
    sides = {}
    for name in names:
        sides[name] = greedy = _Greedy(runners[name], prompt, capacity)
        greedy.decode(1, clock)  # warm-up step (not timed)
    tell(1, total)
    speeds: dict[str, list[float]] = {name: [] for name in names}
    started = clock()
    rounds = 0
    while rounds < MIN_ROUNDS or (rounds < MAX_ROUNDS and clock() - started < BUDGET_S):
        for name in names if rounds % 2 == 0 else names[::-1]:
            speeds[name].append(sides[name].decode(DECODE_TOKENS, clock))
        rounds += 1
        tell(1 + rounds if rounds < MAX_ROUNDS else total, total)
    if rounds < MAX_ROUNDS:
        tell(total, total)
    first, second = names
    ratios = [b / a for a, b in zip(speeds[first], speeds[second], strict=True)]
    return DecodeTiming(
        {name: statistics.median(s) for name, s in speeds.items()},
        statistics.median(ratios),
        rounds,
        DECODE_TOKENS,
    )
