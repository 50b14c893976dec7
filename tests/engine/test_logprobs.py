"""Logprobs through the engine: raw log-softmax values, their alignment with the released text
(UTF-8 holdback, stop-string holdback and cut, the scaffold's lstrip), and the same values with
and without speculative drafts."""

from __future__ import annotations

import numpy as np
import pytest

from ember.engine.api import (
    EngineInfo,
    Event,
    Finished,
    GenerationRequest,
    SamplingParams,
    TextDelta,
)
from ember.engine.errors import EngineError
from ember.engine.logprobs import score_rows
from ember.engine.request_state import RequestState
from ember.engine.runners.fake import FakeRunner
from ember.engine.sampling import log_softmax
from ember.engine.sequence import Sequence
from ember.engine.speculative.adaptive import AdaptiveDraftLength
from ember.engine.speculative.draft_model import DraftModelProposer
from ember.engine.speculative.lookup import PromptLookupProposer
from tests.engine.helpers import greedy, make_engine, prompt_ids, run
from tests.engine.speculative.spec_helpers import (
    CopyingFakeRunner,
    repetitive_prompt,
    spec_engine,
)
from tests.engine.speculative.spec_helpers import PerturbedFakeRunner as Perturbed

_INFO = EngineInfo(model="t", runner="fake", device="cpu", architecture="fake", context_limit=100)
PIECES = {  # a tiny multi-byte vocabulary: id -> bytes
    10: b"a",
    11: b"\xe2\x82",  # the first two bytes of the euro sign
    12: b"\xac",
    13: b"ok E",
    14: b"N",
    15: b"D!",
    16: b" ",
    17: b" Hi",
    18: b"b",
}


class PieceTokenizer:
    """PIECES, and ids 100..355 for single bytes (what encode gives)."""

    def token_bytes(self, token_id: int) -> bytes:
        return bytes([token_id - 100]) if token_id >= 100 else PIECES.get(token_id, b"?")

    def encode(self, text: str, **_: bool) -> list[int]:
        return [100 + b for b in text.encode()]


def _state(stop: tuple[str, ...] = (), lstrip: bool = False) -> tuple[RequestState, list[Event]]:
    events: list[Event] = []
    seq = Sequence([1, 2], SamplingParams(max_tokens=50, logprobs=True, stop=stop))
    state = RequestState.create(seq, PieceTokenizer(), frozenset(), events.append, lstrip=lstrip)  # type: ignore[arg-type]
    return state, events


def _feed(state: RequestState, ids: list[int]) -> str | None:
    reason = None
    for i, token in enumerate(ids):
        rows = np.zeros((1, 20), dtype=np.float32)
        rows[0, token] = float(i + 1)
        reason = state.accept(token, score_rows(rows, [token], 2)[0])
        if reason:
            break
    state.finish(reason or "length", "", _INFO, 100)
    return reason


def _deltas(events: list[Event]) -> list[tuple[str, tuple[int, ...], tuple[bytes, ...]]]:
    return [
        (e.text, e.token_ids, tuple(lp.token for lp in e.logprobs))
        for e in events
        if isinstance(e, TextDelta)
    ]


def test_a_split_character_reports_its_tokens_with_the_text_that_completes_it() -> None:
    state, events = _state()
    _feed(state, [10, 11, 12, 18])
    assert _deltas(events) == [
        ("a", (10,), (b"a",)),
        ("€", (11, 12), (b"\xe2\x82", b"\xac")),
        ("b", (18,), (b"b",)),
    ]
    final = events[-1]
    assert isinstance(final, Finished)
    assert b"".join(lp.token for lp in final.logprobs) == final.text.encode()
    assert [lp.token_id for lp in final.logprobs] == list(final.token_ids)


def test_tokens_cut_by_a_stop_string_drop_their_logprobs() -> None:
    state, events = _state(stop=("END",))
    assert _feed(state, [13, 14, 15]) == "stop"
    # "ok E" is held (E may start END), then END completes: the reply is "ok "
    assert _deltas(events) == [("ok ", (), ()), ("", (13, 14, 15), (b"ok ",))]
    final = events[-1]
    assert isinstance(final, Finished)
    # "ok E" straddles the cut: the reply's ids end with "ok " encoded afresh (reply_ids.py)
    assert final.reply_ids == (100 + ord("o"), 100 + ord("k"), 100 + ord(" "))
    assert isinstance(final, Finished) and final.text == "ok "
    assert final.token_ids == (13, 14, 15)
    assert [lp.token_id for lp in final.logprobs] == [13]


def test_lstripped_whitespace_is_not_in_the_tokens_bytes() -> None:
    state, events = _state(lstrip=True)
    _feed(state, [16, 17, 10])
    assert _deltas(events) == [("Hi", (16, 17), (b"", b"Hi")), ("a", (10,), (b"a",))]


def test_values_are_the_raw_log_softmax_and_tops_are_sorted() -> None:
    rows = np.array([[0.5, 2.0, 2.0, -1.0], [3.0, 0.0, 1.0, 0.0]], dtype=np.float32)
    scored = score_rows(rows, [2, 3], 3)
    expected = log_softmax(rows)
    assert scored[0].logprob == pytest.approx(expected[0, 2], abs=1e-6)
    assert [i for i, _ in scored[0].top] == [1, 2, 0]  # ties: lower id first
    assert [i for i, _ in scored[1].top] == [0, 2, 1]
    for s, row in zip(scored, expected, strict=True):
        assert [lp for _, lp in s.top] == pytest.approx([row[i] for i, _ in s.top], abs=1e-6)
    with pytest.raises(ValueError):
        score_rows(rows, [1], 0)


def test_engine_logprobs_match_the_runner_logits() -> None:
    engine = make_engine()
    runner = engine.runner
    assert isinstance(runner, FakeRunner)
    prompt = list(prompt_ids(9))
    sampling = greedy(6, logprobs=True, top_logprobs=3, repeat_penalty=1.3)
    events = list(engine.generate(GenerationRequest(prompt_ids=tuple(prompt), sampling=sampling)))
    final = events[-1]
    assert isinstance(final, Finished) and len(final.logprobs) == 6
    context = list(prompt)
    for lp, token in zip(final.logprobs, final.token_ids, strict=True):
        raw = log_softmax(runner.reference_logits(context))
        assert lp.token_id == token and lp.logprob == pytest.approx(raw[token], abs=1e-5)
        assert [t.token_id for t in lp.top] == list(np.argsort(-raw, kind="stable")[:3])
        context.append(token)
    streamed = [lp for e in events if isinstance(e, TextDelta) for lp in e.logprobs]
    assert tuple(streamed) == final.logprobs


def test_off_by_default_and_top_needs_logprobs() -> None:
    final = run(make_engine(), GenerationRequest(prompt_ids=prompt_ids(5), sampling=greedy(4)))
    assert final.logprobs == ()
    with pytest.raises(EngineError, match="top_logprobs"):
        SamplingParams(top_logprobs=2)
    with pytest.raises(EngineError, match="top_logprobs"):
        SamplingParams(logprobs=True, top_logprobs=21)


def _logprobs(final: Finished) -> list[tuple[int, float, tuple[int, ...]]]:
    return [(lp.token_id, lp.logprob, tuple(t.token_id for t in lp.top)) for lp in final.logprobs]


def test_lookup_drafts_report_the_same_values_as_plain_decoding() -> None:
    prompt = repetitive_prompt(60)
    sampling = greedy(40, logprobs=True, top_logprobs=2)
    plain = run(
        spec_engine(CopyingFakeRunner(), None),
        GenerationRequest(prompt_ids=prompt, sampling=sampling),
    )
    proposer = PromptLookupProposer(adaptive=AdaptiveDraftLength(5, enabled=False))
    drafted = run(
        spec_engine(CopyingFakeRunner(), proposer, draft_tokens=5),
        GenerationRequest(prompt_ids=prompt, sampling=sampling),
    )
    assert drafted.stats.accepted_tokens > 0 and drafted.token_ids == plain.token_ids
    assert _logprobs(drafted) == pytest.approx(_logprobs(plain))


def test_sampled_draft_model_reports_the_targets_values() -> None:
    # a draft model sampling at temperature > 0 (the min(1, p/q) rule): each reported value is
    # the target's raw log-softmax at that position, never the draft's
    target = CopyingFakeRunner(seed=0)
    draft = DraftModelProposer(Perturbed(seed=0), block_size=4)
    sampling = SamplingParams(
        temperature=0.9, seed=4, max_tokens=30, ignore_eos=True, logprobs=True, top_logprobs=1
    )
    prompt = list(repetitive_prompt(40))
    final = run(
        spec_engine(target, draft, draft_tokens=3),
        GenerationRequest(prompt_ids=tuple(prompt), sampling=sampling),
    )
    assert final.stats.drafted_tokens > 0
    context = list(prompt)
    for lp in final.logprobs:
        raw = log_softmax(target.reference_logits(context))
        assert lp.logprob == pytest.approx(raw[lp.token_id], abs=1e-5)
        assert lp.top[0].token_id == int(np.argmax(raw))
        context.append(lp.token_id)
