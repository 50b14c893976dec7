"""The tiny qwen3moe through the engine's paths, like every family: paged KV with prefix caching,
speculative decoding (prompt lookup, and a dense draft model of the same tokenizer), continuous
batching, and sink eviction past the context."""

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
SYSTEM = [5 + (i * 11) % 300 for i in range(40)]  # a shared "system prompt" of 40 tokens
# most of the vocabulary once: a random model's next token has usually been seen, so one-token
# lookups draft (and mostly miss: rollback of rejected drafts is exercised too)
REPEAT = [3 + (i * 7) % 700 for i in range(300)]


@pytest.fixture(scope="module")
def moe(tiny_models: Any) -> Iterator[TorchRunner]:
    runner = TorchRunner.load(tiny_models.gguf("qwen3moe", "Q4_K_M"), OPTS)
    yield runner
    runner.close()


def _engine(runner: TorchRunner, proposer: Any = None, **options: Any) -> Engine:
    options.setdefault("prefix_disk_bytes", 0)
    options.setdefault("block_size", 16)
    return Engine(runner, EngineOptions(model="tiny-moe", **options), proposer=proposer)


def _request(prompt: list[int], max_tokens: int) -> GenerationRequest:
    sampling = SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True)
    return GenerationRequest(prompt_ids=tuple(prompt), sampling=sampling)


def _alone(runner: TorchRunner, prompt: list[int], max_tokens: int) -> list[int]:
    engine = _engine(runner, prefix_cache=False, draft_tokens=4, window=0)
    return list(run(engine, _request(prompt, max_tokens)).token_ids)


def test_prefix_cache_serves_the_shared_prompt_and_changes_nothing(moe: TorchRunner) -> None:
    first, second = SYSTEM + [21, 22, 23], SYSTEM + [31, 32]
    engine = _engine(moe, prefix_cache=True, window=0)
    run(engine, _request(first, 4))
    again = run(engine, _request(second, 12))
    assert again.stats.cached_tokens >= 32  # the system prompt's two full blocks
    assert list(again.token_ids) == _alone(moe, second, 12)


@pytest.mark.parametrize("draft", ["lookup", "dense"])
def test_speculative_greedy_equals_plain_greedy(
    moe: TorchRunner, tiny_models: Any, draft: str
) -> None:
    plain = _alone(moe, REPEAT, 24)
    if draft == "lookup":
        adaptive = AdaptiveDraftLength(4)
        proposer: Any = PromptLookupProposer(min_ngram=1, max_ngram=2, adaptive=adaptive)
    else:  # the tiny qwen3 shares the MoE's tokenizer: a dense draft of another family
        draft_runner = TorchRunner.load(tiny_models.gguf("qwen3", "Q8_0"), OPTS)
        proposer = DraftModelProposer(draft_runner, block_size=16)
    engine = _engine(moe, proposer, prefix_cache=False, draft_tokens=4, window=0)
    final = run(engine, _request(REPEAT, 24))
    assert list(final.token_ids) == plain
    assert final.stats.drafted_tokens > 0
    engine.blocks.check_invariants()


def test_batched_greedy_equals_each_request_alone(moe: TorchRunner) -> None:
    prompts = [SYSTEM[:9], REPEAT[:20], [40 + i for i in range(30)]]
    alone = [_alone(moe, p, 10 + 3 * i) for i, p in enumerate(prompts)]
    engine = _engine(moe, max_batch=3, prefix_cache=False, window=0)
    requests = [_request(p, 10 + 3 * i) for i, p in enumerate(prompts)]
    events = run_all(engine, requests)
    together = [[e for e in events[r.request_id] if isinstance(e, Finished)][0] for r in requests]
    assert [list(f.token_ids) for f in together] == alone


def test_sink_eviction_runs_past_the_context(moe: TorchRunner) -> None:
    engine = _engine(moe, ctx=64, sink=4, window=32, prefix_cache=False)
    final = run(engine, _request(SYSTEM, 80))
    assert len(final.token_ids) == 80 and final.stats.evicted_tokens > 0
