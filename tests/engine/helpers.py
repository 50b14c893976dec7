"""Shared helpers of the engine tests: FakeRunner engines and contiguous-cache references."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ember.engine.api import EngineOptions, Event, Finished, GenerationRequest, SamplingParams
from ember.engine.engine import Engine
from ember.engine.runners.base import ForwardBatch
from ember.engine.runners.fake import FakeRunner, fake_chat_ids


class RecordingRunner(FakeRunner):
    """A FakeRunner that remembers the largest cache any sequence reached and each batch size."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.max_cache_tokens = 0
        self.batch_sizes: list[int] = []

    def forward(self, batch: ForwardBatch) -> list[np.ndarray]:
        self.batch_sizes.append(len(batch.steps))
        for step in batch.steps:
            self.max_cache_tokens = max(
                self.max_cache_tokens, step.num_cached + len(step.token_ids)
            )
        return super().forward(batch)


def make_engine(runner: FakeRunner | None = None, **options: Any) -> Engine:
    options.setdefault("prefix_disk_bytes", 0)
    runner = runner or RecordingRunner()
    chat = functools.partial(fake_chat_ids, runner.tokenizer)
    return Engine(runner, EngineOptions(model="fake", **options), chat=chat)


def fake_of(engine: Engine) -> FakeRunner:
    """The engine's runner as the FakeRunner the test gave it (reference_logits, counters)."""
    assert isinstance(engine.runner, FakeRunner)
    return engine.runner


def greedy(max_tokens: int, **kwargs: Any) -> SamplingParams:
    return SamplingParams(max_tokens=max_tokens, ignore_eos=True, **kwargs)


def prompt_ids(length: int, salt: int = 0) -> tuple[int, ...]:
    return tuple(4 + (i * 7 + salt * 13) % 200 for i in range(length))


def run(engine: Engine, request: GenerationRequest) -> Finished:
    events = list(engine.generate(request))
    final = events[-1]
    assert isinstance(final, Finished)
    return final


def run_all(engine: Engine, requests: list[GenerationRequest]) -> dict[int, list[Event]]:
    """Submit all requests at once and step until every one has finished."""
    events: dict[int, list[Event]] = {r.request_id: [] for r in requests}
    for request in requests:
        engine.add_request(request, events[request.request_id].append)
    while engine.has_work:
        engine.step()
    return events


def reference_greedy(runner: FakeRunner, prompt: list[int], count: int) -> list[int]:
    """Greedy decoding with one contiguous cache (the whole context, positions 0..n-1)."""
    context, out = list(prompt), []
    for _ in range(count):
        token = int(np.argmax(runner.reference_logits(context)))
        out.append(token)
        context.append(token)
    return out


def reference_sink_greedy(
    runner: FakeRunner,
    prompt: list[int],
    count: int,
    sink_kept: int,
    window: int,
    block: int,
    chunk: int,
) -> list[int]:
    """StreamingLLM by hand: keep sink_kept first tokens, drop whole blocks after them so the
    cache never exceeds sink_kept + window + block, re-base positions (a plain list does that)."""
    limit = sink_kept + window + block
    cache: list[int] = []

    def feed(tokens: list[int]) -> None:
        excess = len(cache) + len(tokens) - limit
        if excess > 0:
            drop = -(-excess // block) * block
            del cache[sink_kept : sink_kept + drop]
        cache.extend(tokens)

    for start in range(0, len(prompt), chunk):
        feed(prompt[start : start + chunk])
    out: list[int] = []
    for _ in range(count):
        token = int(np.argmax(runner.reference_logits(cache)))
        out.append(token)
        feed([token])
    return out


class ScriptedRunner(FakeRunner):
    """A FakeRunner whose greedy continuation of every sequence is `script` (then EOS).

    Each forward's last row of a sequence puts its maximum on the next scripted id; prompts must
    fit one prefill chunk (one forward per sampled token, no drafts).
    """

    def __init__(self, script: list[int], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.script = script
        self._sampled: dict[int, int] = {}

    def forward(self, batch: ForwardBatch) -> list[np.ndarray]:
        out = super().forward(batch)
        for step, rows in zip(batch.steps, out, strict=True):
            k = self._sampled.get(step.seq_id, 0)
            self._sampled[step.seq_id] = k + 1
            token = self.script[k] if k < len(self.script) else self.tokenizer.eos_id
            rows[-1] = 0.0
            rows[-1, token] = 10.0
        return out
