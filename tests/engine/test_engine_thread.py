from __future__ import annotations

import threading

from ember.engine.api import EngineOptions, Finished, GenerationRequest, TextDelta
from ember.engine.engine_thread import EngineThread
from ember.engine.load import load_engine
from tests.engine.helpers import fake_of, greedy, make_engine, prompt_ids, reference_greedy


def test_concurrent_submits_from_threads_batch_together() -> None:
    backend = EngineThread(make_engine(window=0, block_size=4, max_batch=4))
    try:
        requests = [
            GenerationRequest(prompt_ids=prompt_ids(6 + i, salt=i), sampling=greedy(20))
            for i in range(4)
        ]
        results: dict[int, Finished] = {}

        def worker(request: GenerationRequest) -> None:
            results[request.request_id] = backend.submit(request).result()

        threads = [threading.Thread(target=worker, args=(r,)) for r in requests]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        runner = fake_of(backend.engine)
        for request in requests:
            expected = reference_greedy(runner, list(request.prompt_ids or ()), 20)
            assert list(results[request.request_id].token_ids) == expected
    finally:
        backend.close()


def test_abort_from_another_thread_while_iterating() -> None:
    backend = EngineThread(make_engine(window=0, ctx=100_000))
    try:
        handle = backend.submit(
            GenerationRequest(prompt_ids=prompt_ids(5), sampling=greedy(50_000))
        )
        seen = []
        for event in handle:
            seen.append(event)
            if len(seen) == 3:
                threading.Thread(target=handle.abort).start()
        final = seen[-1]
        assert isinstance(final, Finished) and final.reason == "abort"
        assert all(isinstance(e, TextDelta) for e in seen[:-1])
        assert handle.result() is final
        assert backend.call(lambda engine: engine.blocks.num_used_blocks) == 0
    finally:
        backend.close()


def test_bad_request_fails_its_handle_only() -> None:
    backend = EngineThread(make_engine(window=0, ctx=64))
    try:
        bad = backend.submit(GenerationRequest(prompt_ids=prompt_ids(100), sampling=greedy(2)))
        good = backend.submit(GenerationRequest(prompt_ids=prompt_ids(5), sampling=greedy(2)))
        assert bad.result().reason == "error" and "does not fit" in bad.result().error
        assert good.result().reason == "length"
        assert backend.count_tokens(GenerationRequest(prompt="abc")) == 4  # BOS + 3 bytes
    finally:
        backend.close()


def test_close_aborts_running_requests() -> None:
    backend = EngineThread(make_engine(window=0, ctx=100_000))
    handle = backend.submit(GenerationRequest(prompt_ids=prompt_ids(5), sampling=greedy(50_000)))
    next(iter(handle))  # it is running
    backend.close()
    assert handle.result().reason == "abort"
    late = backend.submit(GenerationRequest(prompt_ids=prompt_ids(5), sampling=greedy(2)))
    assert late.result().reason == "abort"


def test_load_engine_with_fake_runner() -> None:
    backend = load_engine(EngineOptions(model="fake", runner="fake", window=0))
    try:
        assert backend.info.runner == "fake"
        final = backend.submit(GenerationRequest(prompt="hello", sampling=greedy(4))).result()
        assert final.stats.generated_tokens == 4
    finally:
        backend.close()
