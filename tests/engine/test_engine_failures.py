"""A failure inside one request ends that request only; a dead or wedged engine says so."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from ember.engine.api import (
    ChatMessage,
    Finished,
    GenerationRequest,
    SamplingParams,
)
from ember.engine.engine import Engine
from ember.engine.engine_thread import EngineThread
from ember.engine.errors import EngineError
from ember.engine.runners.base import ForwardBatch
from ember.engine.runners.fake import FakeRunner, FakeTokenizer, fake_chat_ids
from tests.engine.helpers import greedy, make_engine, prompt_ids, reference_greedy
from tests.waiting import wait_until


class PoisonTokenizer(FakeTokenizer):
    """Raises (not an EmberError) for the bytes of one token: a detokenizer bug on one path."""

    poison = -1

    def token_bytes(self, token_id: int) -> bytes:
        if token_id == self.poison:
            raise RuntimeError("no bytes for this token")
        return super().token_bytes(token_id)


def _serve(engine: Engine) -> EngineThread:
    return EngineThread(engine)


def _wait(condition: Callable[[], bool], timeout_s: float = 30.0) -> None:
    wait_until(condition, "the backend's health changes", timeout_s, interval_s=0.01)


def test_lone_surrogates_are_tokenized_as_replacement_characters() -> None:
    backend = _serve(make_engine(window=0))
    try:
        raw = backend.submit(GenerationRequest(prompt="caf\udce9", sampling=greedy(3))).result()
        chat = backend.submit(
            GenerationRequest(messages=(ChatMessage("user", "\ud800x\udfff"),), sampling=greedy(3))
        ).result()
        assert raw.reason == "length" and chat.reason == "length"
        same = backend.count_tokens(GenerationRequest(prompt="caf\ufffd"))
        assert raw.stats.prompt_tokens == same  # U+FFFD, exactly
        assert backend.health().ok
    finally:
        backend.close()


def test_seed_out_of_numpy_range_is_a_one_line_error() -> None:
    with pytest.raises(EngineError, match=r"sampling seed=-1: must be between 0 and 18446744073709551615"):
        SamplingParams(seed=-1)
    with pytest.raises(EngineError, match="seed"):
        SamplingParams(seed=1 << 64)
    assert SamplingParams(seed=(1 << 64) - 1).seed == (1 << 64) - 1


def test_any_exception_while_adding_fails_that_request_only() -> None:
    runner = FakeRunner()

    def chat(messages: Any) -> list[int]:
        if messages and messages[0].content == "boom":
            raise StopIteration  # what segments.py once raised for private-use text
        return fake_chat_ids(runner.tokenizer, messages)

    engine = Engine(runner, make_engine().options, chat=chat)
    backend = _serve(engine)
    try:
        bad = backend.submit(
            GenerationRequest(messages=(ChatMessage("user", "boom"),), sampling=greedy(2))
        )
        good = backend.submit(GenerationRequest(prompt_ids=prompt_ids(5), sampling=greedy(4)))
        fin = bad.result()
        assert fin.reason == "error" and fin.error == "request failed: StopIteration"
        assert good.result().reason == "length"
        assert backend.call(lambda e: e.blocks.num_used_blocks) == 0
        assert backend.health().ok
    finally:
        backend.close()


def test_a_failure_inside_a_step_ends_only_its_request_and_frees_its_blocks() -> None:
    runner = FakeRunner()
    tokenizer = runner.tokenizer = PoisonTokenizer()
    poisoned = prompt_ids(6, salt=99)
    tokenizer.poison = reference_greedy(runner, list(poisoned), 1)[0]
    candidates = [prompt_ids(5 + i, salt=i) for i in range(12)]
    others = [
        p for p in candidates if tokenizer.poison not in reference_greedy(runner, list(p), 12)
    ]
    others = others[:3]
    assert len(others) == 3
    backend = _serve(make_engine(runner, window=0, block_size=4, max_batch=4))
    try:
        handles = [
            backend.submit(GenerationRequest(prompt_ids=p, sampling=greedy(12)))
            for p in (poisoned, *others)
        ]
        finals = [h.result() for h in handles]
        assert finals[0].reason == "error"
        assert finals[0].error == "request failed: RuntimeError: no bytes for this token"
        for prompt, fin in zip(others, finals[1:], strict=True):  # batch-mates: exact, unharmed
            assert fin.reason == "length"
            assert list(fin.token_ids) == reference_greedy(runner, list(prompt), 12)
        assert backend.call(lambda e: e.blocks.num_used_blocks) == 0
        assert backend.submit(GenerationRequest(prompt_ids=others[0], sampling=greedy(3))).result()
        assert backend.health().ok
    finally:
        backend.close()


def test_step_failure_outside_any_request_ends_those_requests_and_keeps_serving() -> None:
    engine = make_engine(window=0)
    real_schedule = engine.scheduler.schedule
    calls = {"n": 0}

    def schedule() -> Any:
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyError("scheduler bug")
        return real_schedule()

    engine.scheduler.schedule = schedule  # type: ignore[method-assign]
    backend = _serve(engine)
    try:
        first = backend.submit(GenerationRequest(prompt_ids=prompt_ids(5), sampling=greedy(50)))
        fin = first.result()
        assert (
            fin.reason == "error" and fin.error == "engine step failed: KeyError: 'scheduler bug'"
        )
        later = backend.submit(GenerationRequest(prompt_ids=prompt_ids(5), sampling=greedy(3)))
        assert later.result().reason == "length"
        assert backend.call(lambda e: e.blocks.num_used_blocks) == 0
        assert backend.health().ok
    finally:
        backend.close()


def test_an_engine_that_cannot_make_progress_is_reported_dead() -> None:
    engine = make_engine(window=0)
    engine.step = functools.partial(_raise, RuntimeError("stuck"))  # type: ignore[method-assign]
    engine.fail_request = lambda *args: None  # type: ignore[method-assign]  # frees nothing
    backend = _serve(engine)
    try:
        handle = backend.submit(GenerationRequest(prompt_ids=prompt_ids(5), sampling=greedy(3)))
        assert handle.result().reason == "error"
        _wait(lambda: not backend.health().ok)
        health = backend.health()
        assert health.status == "dead" and "stuck" in health.detail
        late = backend.submit(GenerationRequest(prompt_ids=prompt_ids(5), sampling=greedy(3)))
        assert late.result().reason == "error" and "stuck" in late.result().error
        with pytest.raises(EngineError, match="stuck"):
            backend.count_tokens(GenerationRequest(prompt="x"))
    finally:
        backend.close()
    assert backend.health().status == "closed"


def test_a_dead_engine_thread_is_reported_and_never_hangs_a_caller() -> None:
    engine = make_engine(window=0)
    engine.step = functools.partial(_raise, SystemExit(3))  # type: ignore[method-assign]
    backend = _serve(engine)
    handle = backend.submit(GenerationRequest(prompt_ids=prompt_ids(5), sampling=greedy(3)))
    fin = handle.result()
    assert fin.reason == "error" and fin.error == "engine thread stopped: SystemExit: 3"
    _wait(lambda: backend.health().status == "dead")
    late = backend.submit(GenerationRequest(prompt_ids=prompt_ids(5), sampling=greedy(3)))
    assert late.result().error == "engine thread stopped: SystemExit: 3"
    with pytest.raises(EngineError, match="engine thread stopped"):
        backend.count_tokens(GenerationRequest(prompt="x"))
    backend.close()
    assert engine.runner.closed  # type: ignore[attr-defined]  # released even though it died


def test_a_wedged_step_is_reported_until_it_returns() -> None:
    release = threading.Event()

    class Slow(FakeRunner):
        def forward(self, batch: ForwardBatch) -> list[np.ndarray]:
            release.wait(timeout=60)
            return super().forward(batch)

    backend = EngineThread(make_engine(Slow(), window=0), wedged_after_s=0.05)
    try:
        handle = backend.submit(GenerationRequest(prompt_ids=prompt_ids(5), sampling=greedy(2)))
        _wait(lambda: backend.health().status == "wedged")
        assert "one engine step has run for" in backend.health().detail
        release.set()
        assert handle.result().reason == "length"
        _wait(lambda: backend.health().ok)
    finally:
        release.set()
        backend.close()


def test_closed_backend_refuses_at_once() -> None:
    backend = _serve(make_engine(window=0))
    backend.close()
    assert backend.health().status == "closed"
    fin = backend.submit(GenerationRequest(prompt_ids=prompt_ids(5), sampling=greedy(2))).result()
    assert isinstance(fin, Finished) and fin.reason == "abort"


def _raise(exc: BaseException) -> None:
    raise exc


def test_count_tokens_turns_an_unexpected_failure_into_one_line() -> None:
    runner = FakeRunner()

    def chat(messages: Any) -> list[int]:
        raise StopIteration

    backend = _serve(Engine(runner, make_engine().options, chat=chat))
    try:
        with pytest.raises(EngineError, match="^counting tokens failed: StopIteration$"):
            backend.count_tokens(GenerationRequest(messages=(ChatMessage("user", "x"),)))
        assert backend.count_tokens(GenerationRequest(prompt="abc")) == 4
        assert backend.health().ok
    finally:
        backend.close()
