from __future__ import annotations

import numpy as np
import pytest

from ember.engine.api import ChatMessage, Finished, GenerationRequest, SamplingParams, TextDelta
from ember.engine.errors import EngineError
from ember.engine.runners.base import ForwardBatch
from ember.engine.runners.fake import FakeRunner
from ember.engine.sequence import Sequence
from tests.engine.helpers import (
    RecordingRunner,
    fake_of,
    greedy,
    make_engine,
    prompt_ids,
    reference_greedy,
    reference_sink_greedy,
    run,
    run_all,
)


@pytest.mark.parametrize("block_size,chunk", [(4, 8), (16, 512), (2, 3)])
def test_greedy_through_paged_cache_equals_contiguous_reference(
    block_size: int, chunk: int
) -> None:
    engine = make_engine(block_size=block_size, prefill_chunk=chunk, ctx=256, window=0)
    prompt = prompt_ids(37)
    final = run(engine, GenerationRequest(prompt_ids=prompt, sampling=greedy(30)))
    assert final.reason == "length"
    assert list(final.token_ids) == reference_greedy(fake_of(engine), list(prompt), 30)
    assert final.stats.prompt_tokens == 37 and final.stats.generated_tokens == 30


def test_events_stream_text_then_finished() -> None:
    engine = make_engine(window=0)
    events = list(engine.generate(GenerationRequest(prompt="hi there", sampling=greedy(12))))
    assert isinstance(events[-1], Finished)
    deltas = [e for e in events[:-1] if isinstance(e, TextDelta)]
    assert "".join(d.text for d in deltas) == events[-1].text
    assert tuple(t for d in deltas for t in d.token_ids) == events[-1].token_ids
    stats = events[-1].stats
    assert stats.runner == "fake" and stats.ttft_s > 0 and stats.prefill_tok_s > 0


def test_prefix_cache_hit_output_equals_cold() -> None:
    system = list(prompt_ids(40, salt=1))
    first = tuple(system + list(prompt_ids(9, salt=2)))
    second = tuple(system + list(prompt_ids(11, salt=3)))
    cold = make_engine(block_size=8, prefix_cache=False, window=0)
    cold_out = run(cold, GenerationRequest(prompt_ids=second, sampling=greedy(20)))
    warm = make_engine(block_size=8, window=0)
    run(warm, GenerationRequest(prompt_ids=first, sampling=greedy(5)))
    computed_before = fake_of(warm).num_forward_tokens
    warm_out = run(warm, GenerationRequest(prompt_ids=second, sampling=greedy(20)))
    assert warm_out.token_ids == cold_out.token_ids
    assert warm_out.stats.cached_tokens == 40
    assert cold_out.stats.cached_tokens == 0
    assert fake_of(warm).num_forward_tokens - computed_before == len(second) - 40 + 19


def test_second_chat_turn_reuses_the_first() -> None:
    engine = make_engine(block_size=4, window=0)
    turn1 = [ChatMessage("system", "be brief"), ChatMessage("user", "hello there")]
    reply = run(engine, GenerationRequest(messages=tuple(turn1), sampling=greedy(8)))
    turn2 = (*turn1, ChatMessage("assistant", reply.text), ChatMessage("user", "more"))
    again = run(engine, GenerationRequest(messages=turn2, sampling=greedy(8)))
    prompt1 = engine.count_tokens(GenerationRequest(messages=tuple(turn1)))
    assert again.stats.cached_tokens >= prompt1 // 4 * 4


def test_batching_equals_one_at_a_time() -> None:
    requests = [
        GenerationRequest(prompt_ids=prompt_ids(5 + 9 * i, salt=i), sampling=greedy(6 + 5 * i))
        for i in range(4)
    ]
    solo = {}
    for request in requests:
        engine = make_engine(block_size=4, prefill_chunk=16, window=0)
        solo[request.request_id] = run(engine, request).token_ids
    batched = make_engine(block_size=4, prefill_chunk=16, max_batch=4, window=0)
    events = run_all(batched, requests)
    for request in requests:
        final = events[request.request_id][-1]
        assert isinstance(final, Finished)
        assert final.token_ids == solo[request.request_id]
    assert max(batched.runner.batch_sizes) == 4  # type: ignore[attr-defined]


def test_requests_join_and_leave_between_steps() -> None:
    engine = make_engine(block_size=4, window=0)
    long = GenerationRequest(prompt_ids=prompt_ids(10), sampling=greedy(30))
    short = GenerationRequest(prompt_ids=prompt_ids(7, salt=5), sampling=greedy(3))
    events: dict[int, list] = {long.request_id: [], short.request_id: []}
    engine.add_request(long, events[long.request_id].append)
    for _ in range(5):
        engine.step()
    engine.add_request(short, events[short.request_id].append)
    while engine.has_work:
        engine.step()
    assert events[long.request_id][-1].token_ids == tuple(
        reference_greedy(fake_of(engine), list(long.prompt_ids or ()), 30)
    )
    assert events[short.request_id][-1].token_ids == tuple(
        reference_greedy(fake_of(engine), list(short.prompt_ids or ()), 3)
    )


def test_abort_frees_blocks_at_once() -> None:
    engine = make_engine(block_size=4, window=0, prefix_cache=False)
    request = GenerationRequest(prompt_ids=prompt_ids(30), sampling=greedy(100))
    events: list = []
    engine.add_request(request, events.append)
    for _ in range(3):
        engine.step()
    assert engine.blocks.num_used_blocks > 0
    engine.abort(request.request_id)
    assert engine.blocks.num_used_blocks == 0
    assert isinstance(events[-1], Finished) and events[-1].reason == "abort"
    assert not engine.has_work
    engine.blocks.check_invariants()


@pytest.mark.parametrize("prompt_len,chunk", [(6, 64), (150, 64), (150, 5)])
def test_sink_window_bound_and_streaming_reference(prompt_len: int, chunk: int) -> None:
    runner = RecordingRunner()
    engine = make_engine(runner, block_size=8, sink=4, window=32, ctx=128, prefill_chunk=chunk)
    prompt = prompt_ids(prompt_len)
    final = run(engine, GenerationRequest(prompt_ids=prompt, sampling=greedy(120)))
    limit = 8 + 32 + 8  # sinks rounded to a block + window + one block
    assert runner.max_cache_tokens <= limit
    assert final.stats.context_limit == limit
    expected = reference_sink_greedy(runner, list(prompt), 120, 8, 32, 8, min(chunk, 32))
    assert list(final.token_ids) == expected
    total = prompt_len + 120 - 1  # the last sample is never fed
    assert final.stats.evicted_tokens == total - final.stats.context_tokens > 0


def test_sink_shift_matters() -> None:
    """Without the position re-base the fake model's output changes (so the test above bites)."""

    class NoShift(RecordingRunner):
        def shift_positions(self, seq_id: int, block_ids: list[int], delta: int) -> None:
            pass

    prompt = prompt_ids(6)
    good = run(
        make_engine(RecordingRunner(), block_size=8, window=32, ctx=128),
        GenerationRequest(prompt_ids=prompt, sampling=greedy(80)),
    )
    bad = run(
        make_engine(NoShift(), block_size=8, window=32, ctx=128),
        GenerationRequest(prompt_ids=prompt, sampling=greedy(80)),
    )
    assert good.token_ids != bad.token_ids


def test_full_context_without_window_ends_with_length_not_error() -> None:
    engine = make_engine(block_size=4, ctx=32, window=0)
    final = run(engine, GenerationRequest(prompt_ids=prompt_ids(10), sampling=greedy(100)))
    assert final.reason == "length" and final.stats.context_tokens == 32
    assert final.token_ids == tuple(reference_greedy(fake_of(engine), list(prompt_ids(10)), 23))
    with pytest.raises(EngineError, match="does not fit"):
        run(engine, GenerationRequest(prompt_ids=prompt_ids(40), sampling=greedy(2)))


def test_pool_pressure_waits_or_preempts_never_truncates() -> None:
    requests = [
        GenerationRequest(prompt_ids=prompt_ids(20, salt=i), sampling=greedy(40)) for i in range(3)
    ]
    # ctx 64 with 4-token blocks: one sequence needs 17 blocks; the pool has 20.
    engine = make_engine(block_size=4, ctx=64, window=0, kv_budget_bytes=20 * 4 * 16, max_batch=3)
    assert engine.blocks.num_blocks == 20
    events = run_all(engine, requests)
    for request in requests:
        final = events[request.request_id][-1]
        assert isinstance(final, Finished)
        assert final.reason == "length" and final.stats.generated_tokens == 40
        assert list(final.token_ids) == reference_greedy(
            fake_of(engine), list(request.prompt_ids or ()), 40
        )
    engine.blocks.check_invariants()


def test_kv_budget_too_small_is_a_clear_error() -> None:
    with pytest.raises(EngineError, match="kv budget"):
        make_engine(block_size=4, ctx=64, window=0, kv_budget_bytes=100)


def test_stop_token_ends_without_emitting_it() -> None:
    engine = make_engine(window=0)
    prompt = prompt_ids(12)
    ref = reference_greedy(fake_of(engine), list(prompt), 10)
    stop = ref[6]
    params = SamplingParams(max_tokens=10, ignore_eos=True, stop_token_ids=(stop,))
    final = run(engine, GenerationRequest(prompt_ids=prompt, sampling=params))
    assert final.reason == "stop" and list(final.token_ids) == ref[: ref.index(stop)]


def test_seeded_sampling_is_reproducible_and_batch_independent() -> None:
    params = SamplingParams(temperature=0.9, top_k=20, seed=11, max_tokens=15, ignore_eos=True)
    request = GenerationRequest(prompt_ids=prompt_ids(9), sampling=params)
    a = run(make_engine(window=0), request)
    b = run(make_engine(window=0), GenerationRequest(prompt_ids=prompt_ids(9), sampling=params))
    assert a.token_ids == b.token_ids
    other = GenerationRequest(prompt_ids=prompt_ids(9, salt=4), sampling=params)
    mine = GenerationRequest(prompt_ids=prompt_ids(9), sampling=params)
    events = run_all(make_engine(window=0), [other, mine])
    assert events[mine.request_id][-1].token_ids == a.token_ids


class OracleProposer:
    """Proposes the reference continuation, wrong every third guess (tests the verify hook)."""

    def __init__(self, runner: FakeRunner) -> None:
        self.runner = runner
        self.calls = 0

    def propose(self, seq: Sequence, max_tokens: int) -> list[int]:
        self.calls += 1
        guess = reference_greedy(self.runner, seq.token_ids, max_tokens)
        if self.calls % 3 == 0 and guess:
            guess[-1] = (guess[-1] + 1) % self.runner.info.vocab_size
        return guess


def test_draft_hook_greedy_output_is_plain_greedy() -> None:
    runner = RecordingRunner()
    proposer = OracleProposer(runner)
    from ember.engine.api import EngineOptions
    from ember.engine.engine import Engine

    engine = Engine(
        runner,
        EngineOptions(model="fake", block_size=4, window=0, draft_tokens=3, prefix_disk_bytes=0),
        proposer=proposer,
    )
    prompt = prompt_ids(10)
    final = run(engine, GenerationRequest(prompt_ids=prompt, sampling=greedy(25)))
    assert list(final.token_ids) == reference_greedy(runner, list(prompt), 25)
    assert final.stats.drafted_tokens > 0
    assert 0 < final.stats.accepted_tokens < final.stats.drafted_tokens
    engine.blocks.check_invariants()


def test_runner_failure_ends_request_with_error() -> None:
    class Broken(FakeRunner):
        def forward(self, batch: ForwardBatch) -> list[np.ndarray]:
            raise RuntimeError("device lost")

    engine = make_engine(Broken(), window=0)
    final = run(engine, GenerationRequest(prompt_ids=prompt_ids(5), sampling=greedy(3)))
    assert final.reason == "error" and "device lost" in final.error
    assert engine.blocks.num_used_blocks == 0


def test_wrong_block_table_changes_output() -> None:
    """The fake model reads through the block table: scrambling it changes the logits."""
    runner = FakeRunner()
    runner.init_kv(4, 4)
    from ember.engine.runners.base import SeqStep

    tokens = list(prompt_ids(8))
    step = SeqStep(1, tokens, list(range(8)), 0, [2, 0])
    good = runner.forward(ForwardBatch([step]))[0]
    assert np.allclose(good[0], runner.reference_logits(tokens))
    swapped = SeqStep(2, [tokens[-1]], [7], 7, [0, 2])  # same slots, blocks swapped
    runner.forward(ForwardBatch([SeqStep(3, tokens[:7], list(range(7)), 0, [2, 0])]))
    assert not np.allclose(runner.forward(ForwardBatch([swapped]))[0][0], good[0])
