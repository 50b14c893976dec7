"""FakeBackend: replays tokens, aborts, fails on cue, reports stats and a simulated prefix cache."""

from __future__ import annotations

from ember.engine.api import ChatMessage, EngineOptions, Finished, GenerationRequest, TextDelta
from ember.tui.fake_backend import FakeBackend, FakeScript, split_tokens


def _request(text: str = "hi", max_tokens: int = 256) -> GenerationRequest:
    from ember.engine.api import SamplingParams

    return GenerationRequest(
        messages=(ChatMessage("user", text),), sampling=SamplingParams(max_tokens=max_tokens)
    )


def test_replays_tokens_then_finishes() -> None:
    backend = FakeBackend(script=FakeScript(replies=["one two three"], tokens_per_s=0))
    events = list(backend.submit(_request()))
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert deltas == split_tokens("one two three") == ["one", " two", " three"]
    last = events[-1]
    assert isinstance(last, Finished) and last.reason == "stop" and last.text == "one two three"
    assert last.stats.generated_tokens == 3 and last.stats.runner == "fake"
    assert backend.info.model == "fake-model"


def test_max_tokens_gives_length() -> None:
    backend = FakeBackend(script=FakeScript(replies=["a b c d"], tokens_per_s=0))
    result = backend.submit(_request(max_tokens=2)).result()
    assert (result.reason, result.text) == ("length", "a b")


def test_abort_keeps_partial_text() -> None:
    backend = FakeBackend(script=FakeScript(replies=["x " * 1000], tokens_per_s=100))
    handle = backend.submit(_request())
    for event in handle:
        if isinstance(event, TextDelta):
            handle.abort()
    result = handle.result()
    assert result.reason == "abort"
    assert 1 <= result.stats.generated_tokens < 1000


def test_error_after_tokens() -> None:
    script = FakeScript(replies=["a b c d"], tokens_per_s=0, fail_after_tokens=2, error="boom")
    result = FakeBackend(script=script).submit(_request()).result()
    assert (result.reason, result.error, result.text) == ("error", "boom", "a b")


def test_prefix_cache_and_eviction_stats() -> None:
    backend = FakeBackend(
        EngineOptions(model="m", ctx=16), FakeScript(replies=["w " * 20], tokens_per_s=0)
    )
    first = backend.submit(_request("alpha beta")).result().stats
    second = backend.submit(_request("alpha beta gamma")).result().stats
    assert first.cached_tokens == 0
    assert second.cached_tokens == 3  # "<user>", " alpha", " beta" shared with the first prompt
    assert second.context_limit == 16 and second.context_tokens == 16
    assert second.evicted_tokens == second.prompt_tokens + second.generated_tokens - 16


def test_echo_and_count_tokens() -> None:
    backend = FakeBackend(script=FakeScript(echo=True, tokens_per_s=0))
    assert backend.submit(_request("ping")).result().text == "You said: ping"
    assert backend.count_tokens(_request("a b")) == 4  # "<user>", " a", " b", "\n"
