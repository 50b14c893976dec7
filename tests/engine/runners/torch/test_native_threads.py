"""The native decode step on Ember's thread pool (csrc/pool.c, team.h): the same logits on any
number of threads (items are claimed dynamically, so which thread computes what changes from
run to run) and from two Python threads at once (the second caller runs alone)."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest
import torch

from ember.engine.runners.torch.native.compile import _compiler
from ember.engine.runners.torch.runner import TorchOptions, TorchRunner
from tests.conftest import PACKED_CACHE_DIR

from .helpers import decode_logits

pytestmark = pytest.mark.skipif(
    _compiler() is None, reason="no C compiler: the native kernels cannot be built here"
)
# past 128 keys (one attention chunk), so the windowed layers (16 keys) and the global ones
# split their keys into different numbers of chunks: a lagging thread must not size a phase
# from a later layer's buffers (the hang this caught)
IDS = [int(x) for x in np.random.default_rng(3).integers(0, 200, 300)]


def _runner(tiny_models: Any) -> TorchRunner:
    opts = TorchOptions(device="cpu", kernels="native", packed_cache_dir=PACKED_CACHE_DIR)
    runner = TorchRunner.load(tiny_models.gguf("gemma3", "Q8_0"), opts)
    assert runner.native is not None
    return runner


def _decode(runner: TorchRunner, threads: int) -> np.ndarray:
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return decode_logits(runner, IDS, prefill=20)
    finally:
        torch.set_num_threads(before)


def test_any_thread_count_gives_the_same_logits(tiny_models: Any) -> None:
    """1 thread, and 4 on this machine's cores (more workers than cores: the oversubscribed
    case the pool exists for), bit for bit."""
    runner = _runner(tiny_models)
    one = _decode(runner, 1)
    for threads in (4, 2):
        assert np.array_equal(_decode(runner, threads), one), threads


def test_concurrent_callers_get_their_own_results(tiny_models: Any) -> None:
    runners = [_runner(tiny_models), _runner(tiny_models)]
    expected = _decode(runners[0], 1)
    torch.set_num_threads(2)
    got: list[np.ndarray] = [np.empty(0)] * 2
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            got[i] = decode_logits(runners[i], IDS, prefill=20)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors and all(not t.is_alive() for t in threads)
    assert all(np.array_equal(g, expected) for g in got)
