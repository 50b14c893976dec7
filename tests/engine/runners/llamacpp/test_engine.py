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
    ModelFiles,
    SamplingParams,
)
from ember.engine.load import load_engine

pytestmark = pytest.mark.model

PROMPT = b"Write a short poem about the sea."
SYSTEM = b"You are a careful assistant. Answer briefly and never invent facts. " * 6


def options(model: ModelFiles, **overrides: Any) -> EngineOptions:
    fields: dict[str, Any] = {"runner": "llama.cpp", "threads": 1, "ctx": 1024, **overrides}
    return EngineOptions(model=model.name, **fields)


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
def engine(starter_files: ModelFiles, snapshots: Path) -> Iterator[Backend]:
    backend = load_engine(options(starter_files, prefix_cache_dir=str(snapshots)), starter_files)
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


def test_sink_window_eviction_runs_past_the_cache(starter_files: ModelFiles, raw: Any) -> None:
    backend = load_engine(options(starter_files, ctx=128, sink=4, window=64), starter_files)
    try:
        ids = raw.tokenize(PROMPT, add_bos=True)
        done = greedy(backend, ids, 100)
    finally:
        backend.close()
    assert done.reason == "length" and done.error == ""
    assert len(done.token_ids) == 100 and done.stats.evicted_tokens > 0
    assert done.stats.context_tokens <= 16 + 64 + 16


def test_disk_snapshot_restores_the_prefix_in_a_fresh_engine(
    engine: Backend, starter_files: ModelFiles, snapshots: Path, raw: Any
) -> None:
    ids = raw.tokenize(SYSTEM + b"Question: name a colour.", add_bos=True)
    first = greedy(engine, ids, 8)  # finishing saves the prompt's blocks to disk
    fresh = load_engine(options(starter_files, prefix_cache_dir=str(snapshots)), starter_files)
    try:
        second = greedy(fresh, ids, 8)
    finally:
        fresh.close()
    assert second.stats.cached_tokens > 0
    assert second.token_ids == first.token_ids


def assert_greedy_up_to_near_ties(raw: Any, prompt: list[int], got: tuple[int, ...]) -> None:
    """got equals raw greedy, or first differs where raw's top two logits nearly tie.

    Verifying k drafts scores k + 1 rows in one llama_decode, and llama.cpp's kernels round
    differently for other batch shapes (up to ~2 logits on this model, measured); so a near-tie
    may flip. Anything else is a real divergence.
    """
    expected = raw_greedy(raw, prompt, len(got))
    diverge = next((i for i, (a, b) in enumerate(zip(got, expected, strict=True)) if a != b), None)
    if diverge is None:
        return
    import llama_cpp
    import numpy as np

    raw.reset()
    raw.eval([*prompt, *expected[:diverge]])
    row = llama_cpp.llama_get_logits_ith(raw.ctx, -1)
    logits = np.ctypeslib.as_array(row, shape=(raw.n_vocab(),))
    margin = float(logits[expected[diverge]] - logits[got[diverge]])
    assert margin < 1.0, f"diverged at {diverge} with a logit margin of {margin:.2f}"


@pytest.mark.slow
@pytest.mark.parametrize("draft", ["lookup", "model"])
def test_speculative_decoding_keeps_the_greedy_output(
    starter_gguf: Path, starter_files: ModelFiles, raw: Any, draft: str
) -> None:
    text = b"Repeat exactly: the red fox, the red fox, the red fox, the red fox."
    ids = raw.tokenize(text, add_bos=True)
    choice = str(starter_gguf) if draft == "model" else draft  # a draft context of its own
    draft_model = starter_files if draft == "model" else None
    backend = load_engine(
        options(starter_files, draft=choice, draft_tokens=4), starter_files, draft_model=draft_model
    )
    try:
        done = greedy(backend, ids, 20)
    finally:
        backend.close()
    assert done.stats.drafted_tokens > 0
    assert draft == "lookup" or done.stats.accepted_tokens > 0
    assert_greedy_up_to_near_ties(raw, ids, done.token_ids)
