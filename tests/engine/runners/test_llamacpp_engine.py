"""The engine driving LlamaCppRunner on the starter model: greedy, prefix cache, sinks, snapshots."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ember.engine.api import (
    Backend,
    EngineOptions,
    Finished,
    GenerationRequest,
    SamplingParams,
    load_engine,
)

pytestmark = pytest.mark.model

PROMPT = b"Write a short poem about the sea."
SYSTEM = b"You are a careful assistant. Answer briefly and never invent facts. " * 6


def options(path: Path, **overrides: Any) -> EngineOptions:
    fields: dict[str, Any] = {"runner": "llama.cpp", "threads": 1, "ctx": 1024, **overrides}
    return EngineOptions(model=str(path), **fields)


@pytest.fixture(scope="module")
def raw(starter_gguf: Path) -> Iterator[Any]:
    import llama_cpp

    llm = llama_cpp.Llama(model_path=str(starter_gguf), n_ctx=1024, n_threads=1, verbose=False)
    yield llm
    llm.close()


@pytest.fixture(scope="module")
def snapshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("prefix")


@pytest.fixture(scope="module")
def engine(starter_gguf: Path, snapshots: Path) -> Iterator[Backend]:
    backend = load_engine(options(starter_gguf, prefix_cache_dir=str(snapshots)))
    yield backend
    backend.close()


def greedy(backend: Backend, ids: list[int], count: int) -> Finished:
    sampling = SamplingParams(temperature=0.0, max_tokens=count, ignore_eos=True)
    return backend.submit(GenerationRequest(prompt_ids=tuple(ids), sampling=sampling)).result()


def raw_greedy(raw: Any, ids: list[int], count: int) -> tuple[int, ...]:
    out: list[int] = []
    for token in raw.generate(ids, temp=0.0, top_k=1, reset=True):
        out.append(token)
        if len(out) == count:
            return tuple(out)
    raise AssertionError("raw llama.cpp stopped early")


def test_engine_greedy_equals_raw_llama(engine: Backend, raw: Any) -> None:
    ids = raw.tokenize(PROMPT, add_bos=True)
    done = greedy(engine, ids, 24)
    assert done.reason == "length" and done.stats.runner == "llama.cpp"
    assert done.token_ids == raw_greedy(raw, ids, 24)


def test_prefix_cache_hit_reuses_the_prompt_and_keeps_the_output(engine: Backend, raw: Any) -> None:
    ids = raw.tokenize(SYSTEM + b"Question: what is the sea?", add_bos=True)
    first = greedy(engine, ids, 12)
    second = greedy(engine, ids, 12)
    assert first.stats.cached_tokens == 0 or first.stats.cached_tokens < len(ids)
    assert second.stats.cached_tokens >= (len(ids) // 16) * 16 - 16 > 0
    assert second.token_ids == first.token_ids == raw_greedy(raw, ids, 12)


def test_sink_window_eviction_runs_past_the_cache(starter_gguf: Path, raw: Any) -> None:
    backend = load_engine(options(starter_gguf, ctx=128, sink=4, window=64))
    try:
        ids = raw.tokenize(PROMPT, add_bos=True)
        done = greedy(backend, ids, 100)
    finally:
        backend.close()
    assert done.reason == "length" and done.error == ""
    assert len(done.token_ids) == 100 and done.stats.evicted_tokens > 0
    assert done.stats.context_tokens <= 16 + 64 + 16


def test_disk_snapshot_restores_the_prefix_in_a_fresh_engine(
    engine: Backend, starter_gguf: Path, snapshots: Path, raw: Any
) -> None:
    ids = raw.tokenize(SYSTEM + b"Question: name a colour.", add_bos=True)
    first = greedy(engine, ids, 8)  # finishing saves the prompt's blocks to disk
    fresh = load_engine(options(starter_gguf, prefix_cache_dir=str(snapshots)))
    try:
        second = greedy(fresh, ids, 8)
    finally:
        fresh.close()
    assert second.stats.cached_tokens > 0
    assert second.token_ids == first.token_ids
