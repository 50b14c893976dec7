"""BlockMap under the real Engine: the FakeRunner's model computed from llama-style memory.

`MappedFakeRunner` keeps no block-addressed store: it plans every step with BlockMap over a
model of llama.cpp's cache (FakeLlamaMemory) and scores each query from the cells its llama
sequence holds, exactly as llama.cpp's attention mask sees them (same sequence, position <=
the query's). The engine (prefix cache, sink eviction with COW and shifts, preemption, disk
snapshots, several sequences per step) must then give token-for-token the FakeRunner's output.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ember.engine.api import GenerationRequest
from ember.engine.runners.base import ForwardBatch
from ember.engine.runners.fake import FakeRunner
from ember.engine.runners.llamacpp.blocks import BlockMap
from ember.engine.runners.llamacpp.runner import LlamaCppRunner
from tests.engine.helpers import greedy, make_engine, prompt_ids, run, run_all
from tests.engine.runners.llamacpp.fake_llama_memory import FakeLlamaMemory


class MappedFakeRunner(FakeRunner):
    """The FakeRunner's model over BlockMap + FakeLlamaMemory instead of a block store."""

    def __init__(self, num_seqs: int = 12) -> None:
        super().__init__()
        self.num_seqs = num_seqs

    def init_kv(self, num_blocks: int, block_size: int) -> None:
        super().init_kv(num_blocks, block_size)
        self.memory = FakeLlamaMemory(num_cells=num_blocks * block_size + 256)
        self.block_map = BlockMap(self.memory, block_size, self.num_seqs)

    def forward(self, batch: ForwardBatch) -> list[np.ndarray]:
        planned = [self.block_map.plan(step) for step in batch.steps]
        for step in planned:
            self.memory.decode(step.llama_seq, step.token_ids, step.positions)
        out = []
        for step in planned:
            cells = self.memory.view(step.llama_seq)
            pos = np.array([p for p, _ in cells])
            tok = np.array([t for _, t in cells])
            queries = step.positions[len(step.positions) - step.num_logits :]
            rows = [self._score(tok[pos <= q], pos[pos <= q], q) for q in queries]
            out.append(np.stack(rows).astype(np.float32))
        return out

    def copy_block(self, src_block: int, dst_block: int, num_tokens: int) -> None:
        self.block_map.copy(src_block, dst_block, num_tokens)

    def shift_positions(self, seq_id: int, block_ids: list[int], delta: int) -> None:
        self.block_map.shift(seq_id, block_ids, delta)

    def release(self, seq_id: int) -> None:
        self.block_map.release(seq_id)

    def read_blocks(self, block_ids: list[int]) -> bytes:
        return LlamaCppRunner.read_blocks(self, block_ids)  # type: ignore[arg-type]

    def write_blocks(self, block_ids: list[int], data: bytes) -> None:
        LlamaCppRunner.write_blocks(self, block_ids, data)  # type: ignore[arg-type]


def both(**options: Any) -> tuple[Any, Any]:
    """(reference engine on FakeRunner, engine on MappedFakeRunner) with the same options."""
    return make_engine(FakeRunner(), **options), make_engine(MappedFakeRunner(), **options)


def tokens_of(engine: Any, request: GenerationRequest) -> tuple[int, ...]:
    return run(engine, request).token_ids


def test_prefix_cache_hits_across_requests() -> None:
    ref, mapped = both(block_size=4, ctx=256, window=0)
    system = list(prompt_ids(30))
    for salt in range(3):
        ids = tuple(system + list(prompt_ids(5, salt=salt + 1)))
        request = GenerationRequest(prompt_ids=ids, sampling=greedy(12))
        done = run(mapped, request)
        assert done.token_ids == tokens_of(ref, request)
        assert salt == 0 or done.stats.cached_tokens >= 28
    assert mapped.runner.block_map.num_recomputed == 0


def test_sink_window_eviction_matches() -> None:
    ref, mapped = both(block_size=4, ctx=64, sink=4, window=24)
    request = GenerationRequest(prompt_ids=prompt_ids(40), sampling=greedy(90))
    done = run(mapped, request)
    assert done.stats.evicted_tokens > 0
    assert done.token_ids == tokens_of(ref, request)


def test_concurrent_sequences_with_a_shared_prefix_match() -> None:
    ref, mapped = both(block_size=4, ctx=128, window=0, max_batch=4)
    shared = list(prompt_ids(18))
    requests = [
        GenerationRequest(prompt_ids=tuple(shared + [10 + i] * (i + 1)), sampling=greedy(15))
        for i in range(4)
    ]
    mapped_events = run_all(mapped, requests)
    ref_requests = [
        GenerationRequest(prompt_ids=r.prompt_ids, sampling=r.sampling) for r in requests
    ]
    ref_events = run_all(ref, ref_requests)
    for mine, theirs in zip(requests, ref_requests, strict=True):
        assert (
            mapped_events[mine.request_id][-1].token_ids
            == ref_events[theirs.request_id][-1].token_ids
        )


def test_pool_pressure_and_preemption_match() -> None:
    options = {
        "block_size": 4,
        "ctx": 64,
        "window": 0,
        "kv_budget_bytes": 20 * 4 * 16,
        "max_batch": 3,
    }
    ref, mapped = both(**options)
    requests = [
        GenerationRequest(prompt_ids=prompt_ids(20, salt=i), sampling=greedy(24)) for i in range(3)
    ]
    ref_requests = [
        GenerationRequest(prompt_ids=r.prompt_ids, sampling=r.sampling) for r in requests
    ]
    mapped_events = run_all(mapped, requests)
    ref_events = run_all(ref, ref_requests)
    for mine, theirs in zip(requests, ref_requests, strict=True):
        assert (
            mapped_events[mine.request_id][-1].token_ids
            == ref_events[theirs.request_id][-1].token_ids
        )


def test_disk_snapshots_restore_through_state_bytes(tmp_path: Path) -> None:
    from ember.engine.api import EngineOptions
    from ember.engine.engine import Engine
    from ember.engine.prefix_store import PrefixStore

    def engine() -> Engine:
        runner = MappedFakeRunner()
        info = runner.info
        store = PrefixStore(
            tmp_path,
            model_digest=info.model_digest,
            runner=info.name,
            dtype=info.dtype,
            block_size=4,
            max_bytes=1 << 20,
        )
        return Engine(
            runner, EngineOptions(model="fake", block_size=4, window=0), prefix_store=store
        )

    request = GenerationRequest(prompt_ids=prompt_ids(37), sampling=greedy(10))
    first = run(engine(), request)
    assert list(tmp_path.iterdir())
    fresh = engine()
    again = run(fresh, GenerationRequest(prompt_ids=request.prompt_ids, sampling=request.sampling))
    assert again.stats.cached_tokens >= 32
    assert again.token_ids == first.token_ids
    assert fresh.runner.block_map.num_recomputed == 0  # type: ignore[attr-defined]


@pytest.mark.parametrize("num_seqs", [3, 4])
def test_few_sequence_slots_still_give_the_same_output(num_seqs: int) -> None:
    ref = make_engine(FakeRunner(), block_size=4, ctx=128, window=0)
    mapped = make_engine(MappedFakeRunner(num_seqs=num_seqs), block_size=4, ctx=128, window=0)
    system = list(prompt_ids(16))
    for salt in range(5):
        request = GenerationRequest(prompt_ids=tuple(system + [20 + salt] * 3), sampling=greedy(6))
        assert tokens_of(mapped, request) == tokens_of(ref, request)


def test_drafts_verified_and_rolled_back_match_plain_greedy() -> None:
    from ember.engine.api import EngineOptions
    from ember.engine.engine import Engine
    from tests.engine.helpers import reference_greedy
    from tests.engine.test_engine import OracleProposer

    runner = MappedFakeRunner()
    options = EngineOptions(model="fake", block_size=4, window=0, draft_tokens=3)
    engine = Engine(runner, options, proposer=OracleProposer(FakeRunner()))
    prompt = prompt_ids(10)
    final = run(engine, GenerationRequest(prompt_ids=prompt, sampling=greedy(25)))
    assert list(final.token_ids) == reference_greedy(FakeRunner(), list(prompt), 25)
    assert 0 < final.stats.accepted_tokens < final.stats.drafted_tokens  # some were rolled back
