"""EngineOptions.progress hears a long prompt's prefill chunk by chunk (a short one: nothing)."""

from __future__ import annotations

from ember.engine.api import GenerationRequest
from tests.engine.helpers import greedy, make_engine, prompt_ids, run


def test_a_prompt_longer_than_one_chunk_reports_its_prefill() -> None:
    heard: list[tuple[str, int, int]] = []
    engine = make_engine(prefill_chunk=32, progress=lambda *p: heard.append(p))
    run(engine, GenerationRequest(prompt_ids=prompt_ids(100), sampling=greedy(3)))
    assert heard == [("prefill", 32, 100), ("prefill", 64, 100), ("prefill", 96, 100),
                     ("prefill", 100, 100)]  # fmt: skip
    heard.clear()
    run(engine, GenerationRequest(prompt_ids=prompt_ids(20, salt=1), sampling=greedy(3)))
    assert heard == []  # one chunk: no wait worth a line
