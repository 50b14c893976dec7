"""The tiny gpt-oss through the engine's paths, like every family: paged KV with prefix caching,
speculative decoding (prompt lookup, and a draft model: the same model's Q8_0 file, so drafts
are mostly but not always accepted), continuous batching, and sink eviction past the context
(StreamingLLM's kept sink tokens, on top of the model's own learned sink logits), all across
its 16-token sliding-window layers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ember.engine.api import EngineOptions, Finished, GenerationRequest, SamplingParams
from ember.engine.engine import Engine
from ember.engine.runners.torch.runner import TorchOptions, TorchRunner
from ember.engine.speculative.adaptive import AdaptiveDraftLength
from ember.engine.speculative.draft_model import DraftModelProposer
from ember.engine.speculative.lookup import PromptLookupProposer
from tests.engine.helpers import run, run_all

OPTS = TorchOptions(device="cpu", threads=1)
SYSTEM = [10 + (i * 11) % 300 for i in range(40)]  # a shared "system prompt" of 40 tokens
REPEAT = [10 + (i * 7) % 700 for i in range(300)]  # most of the vocabulary: lookups draft


@pytest.fixture(scope="module")
def gptoss(tiny_gptoss: Any) -> Iterator[TorchRunner]:
    runner = TorchRunner.load(tiny_gptoss.gguf("MXFP4"), OPTS)
    yield runner
    runner.close()


def _engine(runner: TorchRunner, proposer: Any = None, **options: Any) -> Engine:
    options.setdefault("prefix_disk_bytes", 0)
    options.setdefault("block_size", 16)
    return Engine(runner, EngineOptions(model="tiny-gpt-oss", **options), proposer=proposer)


def _request(prompt: list[int], max_tokens: int) -> GenerationRequest:
    sampling = SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True)
    return GenerationRequest(prompt_ids=tuple(prompt), sampling=sampling)


def _alone(runner: TorchRunner, prompt: list[int], max_tokens: int) -> list[int]:
    engine = _engine(runner, prefix_cache=False, draft_tokens=4, window=0)
    return list(run(engine, _request(prompt, max_tokens)).token_ids)


def test_prefix_cache_serves_the_shared_prompt_and_changes_nothing(gptoss: TorchRunner) -> None:
    first, second = SYSTEM + [21, 22, 23], SYSTEM + [31, 32]
    engine = _engine(gptoss, prefix_cache=True, window=0)
    run(engine, _request(first, 4))
    again = run(engine, _request(second, 12))
    assert again.stats.cached_tokens >= 32  # the system prompt's two full blocks
    assert list(again.token_ids) == _alone(gptoss, second, 12)


@pytest.mark.parametrize("draft", ["lookup", "model"])
def test_speculative_greedy_equals_plain_greedy(
    gptoss: TorchRunner, tiny_gptoss: Any, draft: str
) -> None:
    plain = _alone(gptoss, REPEAT, 24)
    if draft == "lookup":
        adaptive = AdaptiveDraftLength(4)
        proposer: Any = PromptLookupProposer(min_ngram=1, max_ngram=2, adaptive=adaptive)
    else:
        draft_runner = TorchRunner.load(tiny_gptoss.gguf("Q8_0"), OPTS)
        proposer = DraftModelProposer(draft_runner, block_size=16)
    engine = _engine(gptoss, proposer, prefix_cache=False, draft_tokens=4, window=0)
    final = run(engine, _request(REPEAT, 24))
    assert list(final.token_ids) == plain
    assert final.stats.drafted_tokens > 0
    engine.blocks.check_invariants()


def test_batched_greedy_equals_each_request_alone(gptoss: TorchRunner) -> None:
    prompts = [SYSTEM[:9], REPEAT[:20], [40 + i for i in range(30)]]
    alone = [_alone(gptoss, p, 10 + 3 * i) for i, p in enumerate(prompts)]
    engine = _engine(gptoss, max_batch=3, prefix_cache=False, window=0)
    requests = [_request(p, 10 + 3 * i) for i, p in enumerate(prompts)]
    events = run_all(engine, requests)
    together = [[e for e in events[r.request_id] if isinstance(e, Finished)][0] for r in requests]
    assert [list(f.token_ids) for f in together] == alone


def test_sink_eviction_runs_past_the_context(gptoss: TorchRunner) -> None:
    engine = _engine(gptoss, ctx=64, sink=4, window=32, prefix_cache=False)
    final = run(engine, _request(SYSTEM, 80))
    assert len(final.token_ids) == 80 and final.stats.evicted_tokens > 0
