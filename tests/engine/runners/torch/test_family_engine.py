"""The dense families' tiny models through the engine's paths on the torch runner: paged KV with
prefix caching (in RAM and on disk), speculative decoding (prompt lookup, and a draft model of
the same tokenizer), continuous batching, and sink eviction past the context, which re-rotates
kept keys: partial rotary (phi3) and NoPE layers (smollm3) must shift correctly."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ember.engine.api import EngineOptions, Finished, GenerationRequest, SamplingParams
from ember.engine.engine import Engine
from ember.engine.prefix_store import PrefixStore
from ember.engine.runners.torch.runner import TorchOptions, TorchRunner
from ember.engine.speculative.adaptive import AdaptiveDraftLength
from ember.engine.speculative.draft_model import DraftModelProposer
from ember.engine.speculative.lookup import PromptLookupProposer
from tests.engine.helpers import run, run_all
from tests.fixtures.tiny_families import FAMILY_ARCHS

OPTS = TorchOptions(device="cpu", threads=1)
SYSTEM = [5 + (i * 11) % 300 for i in range(40)]  # a shared "system prompt" of 40 tokens
REPEAT = [3 + (i * 7) % 700 for i in range(300)]  # most of the vocabulary: lookups draft


@pytest.fixture(scope="module", params=FAMILY_ARCHS)
def family(request: pytest.FixtureRequest, tiny_models: Any) -> Iterator[tuple[str, TorchRunner]]:
    runner = TorchRunner.load(tiny_models.gguf(request.param, "Q8_0"), OPTS)
    yield request.param, runner
    runner.close()


def _engine(runner: TorchRunner, proposer: Any = None, **options: Any) -> Engine:
    options.setdefault("prefix_disk_bytes", 0)
    options.setdefault("block_size", 16)
    store = options.pop("store", None)
    return Engine(
        runner, EngineOptions(model="tiny", **options), proposer=proposer, prefix_store=store
    )


def _request(prompt: list[int], max_tokens: int) -> GenerationRequest:
    sampling = SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True)
    return GenerationRequest(prompt_ids=tuple(prompt), sampling=sampling)


def _alone(runner: TorchRunner, prompt: list[int], max_tokens: int) -> list[int]:
    engine = _engine(runner, prefix_cache=False, window=0)
    return list(run(engine, _request(prompt, max_tokens)).token_ids)


def test_prefix_cache_serves_the_shared_prompt_and_changes_nothing(
    family: tuple[str, TorchRunner],
) -> None:
    _, runner = family
    first, second = SYSTEM + [21, 22, 23], SYSTEM + [31, 32]
    engine = _engine(runner, prefix_cache=True, window=0)
    run(engine, _request(first, 4))
    again = run(engine, _request(second, 12))
    assert again.stats.cached_tokens >= 32  # the system prompt's two full blocks
    assert list(again.token_ids) == _alone(runner, second, 12)


def test_disk_prefix_store_restores_the_same_reply(
    family: tuple[str, TorchRunner], tmp_path: Path
) -> None:
    """KV blocks written to disk by one engine and read back by a fresh one."""
    _, runner = family
    info = runner.info
    prompt = SYSTEM + [41, 42, 43]
    for _ in range(2):
        store = PrefixStore(
            tmp_path,
            model_digest=info.model_digest or "0" * 64,
            runner="torch",
            dtype=info.dtype,
            block_size=16,
            max_bytes=1 << 26,
        )
        engine = _engine(runner, prefix_cache=True, window=0, store=store)
        final = run(engine, _request(prompt, 10))
    assert final.stats.cached_tokens >= 32
    assert list(final.token_ids) == _alone(runner, prompt, 10)


@pytest.mark.parametrize("draft", ["lookup", "model"])
def test_speculative_greedy_equals_plain_greedy(
    family: tuple[str, TorchRunner], tiny_models: Any, draft: str
) -> None:
    arch, runner = family
    plain = _alone(runner, REPEAT, 24)
    if draft == "lookup":
        adaptive = AdaptiveDraftLength(4)
        proposer: Any = PromptLookupProposer(min_ngram=1, max_ngram=2, adaptive=adaptive)
    else:  # the same family in 4 bits: a draft model of the same tokenizer
        draft_runner = TorchRunner.load(tiny_models.gguf(arch, "Q4_0"), OPTS)
        proposer = DraftModelProposer(draft_runner, block_size=16)
    engine = _engine(runner, proposer, prefix_cache=False, draft_tokens=4, window=0)
    final = run(engine, _request(REPEAT, 24))
    assert list(final.token_ids) == plain
    assert final.stats.drafted_tokens > 0
    engine.blocks.check_invariants()


def test_batched_greedy_equals_each_request_alone(family: tuple[str, TorchRunner]) -> None:
    _, runner = family
    prompts = [SYSTEM[:9], REPEAT[:20], [40 + i for i in range(30)]]
    alone = [_alone(runner, p, 10 + 3 * i) for i, p in enumerate(prompts)]
    engine = _engine(runner, max_batch=3, prefix_cache=False, window=0)
    requests = [_request(p, 10 + 3 * i) for i, p in enumerate(prompts)]
    events = run_all(engine, requests)
    together = [[e for e in events[r.request_id] if isinstance(e, Finished)][0] for r in requests]
    assert [list(f.token_ids) for f in together] == alone


def test_sink_eviction_runs_past_the_context(family: tuple[str, TorchRunner]) -> None:
    _, runner = family
    engine = _engine(runner, ctx=64, sink=4, window=32, prefix_cache=False)
    final = run(engine, _request(SYSTEM, 80))
    assert len(final.token_ids) == 80 and final.stats.evicted_tokens > 0
