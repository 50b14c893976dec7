"""Ends a reply stuck in a cycle: the last tokens are one short sequence repeated over and over.

For every period p up to MAX_PERIOD the detector keeps run[p]: how many of the latest tokens
each equal the token p places before them. The last run[p] + p tokens then read as one cycle of
p tokens repeated, and the reply is looping when, for some p,

    run[p] + p >= max(min_tokens, MIN_REPEATS * p)

(at least min_tokens tokens, and at least MIN_REPEATS whole turns of the cycle). Each token
costs one comparison per period, in numpy. A small base model at temperature 0 repeats the
question forever ("What is the capital of France? mendatang\\n" is a cycle of 9 tokens).
"""

from __future__ import annotations

import numpy as np

MAX_PERIOD = 128  # longest cycle looked for, in tokens
MIN_REPEATS = 3


class LoopDetector:
    """Feed generated ids one at a time; add() returns True once the reply is looping."""

    def __init__(self, min_tokens: int, max_period: int = MAX_PERIOD) -> None:
        if min_tokens < 0 or max_period < 1:
            raise ValueError("min_tokens must be >= 0 and max_period >= 1")
        self.min_tokens = min_tokens
        self.max_period = max_period
        self._recent = np.full(max_period, -1, dtype=np.int64)  # [k] = id k+1 tokens back
        self._run = np.zeros(max_period, dtype=np.int64)  # [p-1] = run for period p
        self._periods = np.arange(1, max_period + 1)
        self._need = np.maximum(min_tokens, MIN_REPEATS * self._periods)
        self.period = 0  # the cycle length found (0 while not looping)

    def add(self, token: int) -> bool:
        if self.min_tokens == 0:
            return False
        same = self._recent == token  # compares with the token p back, for every p at once
        self._run = np.where(same, self._run + 1, 0)
        self._recent[1:] = self._recent[:-1]
        self._recent[0] = token
        looping = np.flatnonzero(self._run + self._periods >= self._need)
        if looping.size:
            self.period = int(self._periods[looping[0]])
            return True
        return False
