"""Generation.follow: deltas coalesced per POST_INTERVAL_S on a hand-moved clock, Finished last."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from textual.message import Message

from ember.engine.api import (
    EngineInfo,
    EngineOptions,
    Event,
    Finished,
    GenerationRequest,
    Health,
    Stats,
    TextDelta,
)
from ember.tui.chat.generation import POST_INTERVAL_S, Generation
from ember.tui.messages import ReplyDelta, ReplyFinished


class TickingHandle:
    """Yields one TextDelta per word, moving the clock by step_s before each; then Finished."""

    def __init__(self, clock: list[float], step_s: float, words: list[str], end: bool) -> None:
        self.clock, self.step_s, self.words, self.end = clock, step_s, words, end
        self.aborted = False

    def __iter__(self) -> Iterator[Event]:
        for i, word in enumerate(self.words):
            self.clock[0] += self.step_s
            yield TextDelta(word, (i,))
        if self.end:
            yield self.result()

    def abort(self) -> None:
        self.aborted = True

    def result(self) -> Finished:
        return Finished("stop", "".join(self.words), (), Stats())


class TickingBackend:
    def __init__(self, handle: TickingHandle) -> None:
        self.handle = handle
        self.info = EngineInfo("m", "stub", "cpu", "stub", 64)

    def submit(self, request: GenerationRequest) -> TickingHandle:
        return self.handle

    def count_tokens(self, request: GenerationRequest) -> int:
        return 1

    def health(self) -> Health:
        return Health("ok")

    def close(self) -> None:
        pass


def _follow(step_s: float, words: list[str], end: bool = True) -> tuple[list[Message], Generation]:
    clock = [0.0]
    generation = Generation(
        7, GenerationRequest(prompt="hi"), EngineOptions(model="m"), lambda: clock[0]
    )
    posted: list[Message] = []
    generation.follow(TickingBackend(TickingHandle(clock, step_s, words, end)), posted.append)
    return posted, generation


def test_fast_stream_is_batched_per_interval_and_finished_comes_last() -> None:
    words = [f"w{i} " for i in range(40)]
    posted, _ = _follow(POST_INTERVAL_S / 4, words)  # 4 tokens per interval
    deltas = [m for m in posted if isinstance(m, ReplyDelta)]
    assert "".join(d.text for d in deltas) == "".join(words)
    assert sum(d.num_tokens for d in deltas) == 40 and deltas[0].num_tokens == 1
    assert 10 <= len(deltas) <= 12  # the first alone, then one per interval, then the rest
    assert all(d.message_id == 7 for d in deltas)
    assert isinstance(posted[-1], ReplyFinished) and posted[-1].finished.reason == "stop"
    assert posted[-1].finished.text == "".join(words)


def test_slow_stream_posts_every_token() -> None:
    posted, _ = _follow(POST_INTERVAL_S, ["a", "b", "c"])
    assert [m.text for m in posted if isinstance(m, ReplyDelta)] == ["a", "b", "c"]


def test_stop_before_submit_aborts_the_handle() -> None:
    clock = [0.0]
    generation = Generation(1, GenerationRequest(prompt="hi"), EngineOptions(model="m"))
    generation.stop()
    handle = TickingHandle(clock, 0.0, ["a"], end=True)
    generation.follow(TickingBackend(handle), lambda m: None)
    assert handle.aborted and generation.stopped


def test_a_stream_that_ends_without_finished_raises() -> None:
    with pytest.raises(RuntimeError, match="without a Finished event"):
        _follow(0.0, ["a"], end=False)
