"""Fakes for the speculative-decoding tests: a FakeRunner that likes to copy its context."""

from __future__ import annotations

from typing import Any

import numpy as np

from ember.engine.api import EngineOptions
from ember.engine.engine import Engine
from ember.engine.runners.fake import FakeRunner
from ember.engine.scheduler import Proposer


class CopyingFakeRunner(FakeRunner):
    """FakeRunner plus a copy bias: the token that followed the latest earlier occurrence of the
    last key is boosted (read through the block table like every other logit), so greedy output
    repeats spans of its context, as real models do when they edit or quote their input."""

    def __init__(self, *, copy_bias: float = 12.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.copy_bias = copy_bias

    def _score(self, keys: np.ndarray, key_pos: np.ndarray, query_pos: int) -> np.ndarray:
        logits = super()._score(keys, key_pos, query_pos)
        last = keys[-1]
        earlier = np.flatnonzero(keys[:-1] == last)
        if earlier.size:
            logits = logits.copy()
            logits[keys[earlier[-1] + 1]] += self.copy_bias
        return logits


def spec_engine(runner: FakeRunner, proposer: Proposer | None, **options: Any) -> Engine:
    """An Engine over runner with a proposer (no disk cache, small blocks to cross boundaries)."""
    options.setdefault("prefix_disk_bytes", 0)
    options.setdefault("block_size", 4)
    options.setdefault("window", 0)
    return Engine(runner, EngineOptions(model="fake", **options), proposer=proposer)


def repetitive_prompt(length: int, period: int = 11, salt: int = 0) -> tuple[int, ...]:
    """A prompt that repeats a period-long pattern with a few edits (a "rewrite this" input)."""
    ids = [4 + (i % period) * 7 % 200 + salt for i in range(length)]
    for i in range(period + 3, length, 2 * period + 1):
        ids[i] = 4 + (ids[i] * 5 + 1) % 250
    return tuple(ids)


class PerturbedFakeRunner(CopyingFakeRunner):
    """A CopyingFakeRunner whose logits get a fixed random offset per last token: a "draft"
    that agrees with the unperturbed model often, but not always."""

    def __init__(self, *, noise: float = 4.0, noise_seed: int = 7, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        rng = np.random.default_rng(noise_seed)
        self._noise = rng.standard_normal((self.info.vocab_size, self.info.vocab_size)) * noise

    def _score(self, keys: np.ndarray, key_pos: np.ndarray, query_pos: int) -> np.ndarray:
        return super()._score(keys, key_pos, query_pos) + self._noise[keys[-1]]
