"""A chat turn past the context (issue 25: "llama_decode failed (invalid batch)" on a second turn).

The second turn's prompt is the first turn's history: it shares the first turn's cached prefix
after sink-window eviction dropped and shifted blocks. It must run under the same eviction policy
as the first turn (never an error), on both runners, with prompts just under, at and past the
context and max_tokens taking it past again. Output is not compared across cache states: under
StreamingLLM the kept keys depend on the prefill schedule, which a prefix hit changes."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest

from ember.engine.api import (
    Backend,
    EngineOptions,
    Finished,
    GenerationRequest,
    ModelFiles,
    SamplingParams,
)
from ember.engine.load import load_engine

pytestmark = pytest.mark.model

CTX = 64  # the derived window: 64 - one sink block - one block = 32 tokens
PAST = 24  # max_tokens that takes a prompt just under, at or past CTX past it again


def greedy(backend: Backend, ids: list[int], count: int) -> Finished:
    sampling = SamplingParams(temperature=0.0, max_tokens=count, ignore_eos=True)
    return backend.submit(GenerationRequest(prompt_ids=tuple(ids), sampling=sampling)).result()


def engine(files: ModelFiles, runner: str, **overrides: Any) -> Backend:
    fields: dict[str, Any] = {"runner": runner, "threads": 1, "ctx": CTX, **overrides}
    return load_engine(EngineOptions(model=files.name, **fields), files)


@pytest.fixture(params=["llama.cpp", "torch"])
def runner(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def warm(starter_files: ModelFiles, runner: str) -> Iterator[Backend]:
    backend = engine(starter_files, runner)
    yield backend
    backend.close()


def words(seed: int, count: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(1000, 20000) for _ in range(count)]


def test_second_and_third_turns_past_the_context_reuse_the_history(warm: Backend) -> None:
    first_prompt = [2, *words(1, 21)]
    first = greedy(warm, first_prompt, CTX + 20)  # the reply alone overflows the context
    assert first.reason == "length" and len(first.token_ids) == CTX + 20
    history = [*first_prompt, *first.token_ids, *words(2, 10)]
    assert len(history) > CTX
    second = greedy(warm, history, 12)
    assert second.reason == "length" and len(second.token_ids) == 12
    assert second.stats.cached_tokens >= 16  # the sink block came from the first turn
    third = greedy(warm, [*history, *second.token_ids, *words(5, 10)], 12)
    assert third.reason == "length" and len(third.token_ids) == 12
    assert third.stats.cached_tokens >= 16


def test_prompts_at_and_past_the_context_after_a_full_turn(warm: Backend) -> None:
    first = greedy(warm, [2, *words(3, 30)], CTX)
    history = [2, *words(3, 30), *first.token_ids, *words(4, 2 * CTX)]
    for length in (CTX - 1, CTX, CTX + 1, 2 * CTX + 3):
        # max_tokens takes it past the context: 24 tokens evict during decode at every length
        # (measured: a block or two more than a 1-token reply evicts; CTX tokens, as before,
        # cost 2.5x the decode and only evicted once more)
        done = greedy(warm, history[:length], PAST)
        assert done.reason == "length" and len(done.token_ids) == PAST, length
        assert done.stats.evicted_tokens >= length + PAST - CTX, length  # it went past
        assert done.stats.cached_tokens >= 16, length  # at least the first turn's sink block
        again = greedy(warm, history[:length], 4)  # again, on the blocks this turn left
        assert again.reason == "length" and len(again.token_ids) == 4, length
