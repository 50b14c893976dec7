"""The loop detector (engine/loop_detector.py) and the "loop" finish reason through the engine."""

from __future__ import annotations

from ember.engine.api import GenerationRequest, SamplingParams
from ember.engine.loop_detector import LoopDetector
from tests.engine.helpers import ScriptedRunner, make_engine, run


def _first_loop(tokens: list[int], min_tokens: int) -> int | None:
    detector = LoopDetector(min_tokens)
    return next((i + 1 for i, t in enumerate(tokens) if detector.add(t)), None)


def test_a_cycle_ends_after_min_tokens_and_three_turns() -> None:
    cycle = list(range(10, 19))  # 9 tokens, like "What is the capital of France? mendatang\n"
    assert _first_loop([5, 6, 7] + cycle * 20, 64) == 3 + 64
    assert _first_loop([1] * 100, 32) == 32
    assert _first_loop(list(range(40, 80)) * 5, 64) == 40 * 3  # long cycle: three turns
    detector = LoopDetector(64)
    for t in cycle * 8:
        detector.add(t)
    assert detector.period == 9


def test_varied_text_and_off_never_fire() -> None:
    text = [(i * 7919) % 251 for i in range(2000)]
    assert _first_loop(text, 64) is None
    assert _first_loop([1] * 500, 0) is None
    almost = [t for k in range(6) for t in [1, 2, 3, 4] * 15 + [9 + k]]  # 60 at most in a row
    assert _first_loop(almost, 64) is None


def test_engine_ends_a_looping_reply_with_reason_loop() -> None:
    runner = ScriptedRunner([20, 21, 22] * 100)
    engine = make_engine(runner)
    request = GenerationRequest(prompt="q", sampling=SamplingParams(max_tokens=500))
    final = run(engine, request)
    assert final.reason == "loop" and len(final.token_ids) == 64
    off = SamplingParams(max_tokens=100, loop_min_tokens=0)
    final = run(
        make_engine(ScriptedRunner([20, 21, 22] * 100)), GenerationRequest(prompt="q", sampling=off)
    )
    assert final.reason == "length" and len(final.token_ids) == 100
    exact = SamplingParams(max_tokens=100, ignore_eos=True)  # asked for exactly 100 tokens
    final = run(
        make_engine(ScriptedRunner([20, 21, 22] * 100)),
        GenerationRequest(prompt="q", sampling=exact),
    )
    assert final.reason == "length" and len(final.token_ids) == 100
