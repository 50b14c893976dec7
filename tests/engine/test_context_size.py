"""`--ctx auto` (engine/context_size.py): the largest context that fits a made-up free-memory
figure, and the engine resolving it for a loaded runner."""

from __future__ import annotations

import pytest

from ember.engine.api import AUTO_CTX, EngineOptions
from ember.engine.context_size import (
    MARGIN,
    POOL_SEQUENCES,
    RESERVE_BYTES,
    ContextFacts,
    auto_context,
)
from ember.engine.errors import EngineError

GIB = 1 << 30
PER_TOKEN = 18432  # the starter model's f16 KV (18 layers x 1 head x 256 x 2 x 2 bytes)


def facts(per_token: int = PER_TOKEN, trained: int = 1 << 20) -> ContextFacts:
    return ContextFacts(weights_bytes=250 << 20, kv_bytes_per_token=per_token, trained_ctx=trained)


def test_the_context_is_what_the_free_memory_holds_after_weights_and_margin() -> None:
    free = 2 * GIB
    got = auto_context(facts(), free)
    room = (free - (250 << 20) - RESERVE_BYTES) * (1 - MARGIN)
    exact = int(room // (POOL_SEQUENCES * PER_TOKEN))
    assert got.ctx == exact // 256 * 256 and got.ctx % 16 == 0
    assert exact - 256 < got.ctx <= exact  # rounded down, never up
    assert got.free_bytes == free - (250 << 20) and not got.capped


def test_a_quantized_cache_fits_about_twice_the_tokens() -> None:
    f16 = auto_context(facts(PER_TOKEN), 2 * GIB).ctx
    q8 = auto_context(facts(9792), 2 * GIB).ctx  # llama.cpp q8_0: 34 bytes per 32 values
    q4 = auto_context(facts(5184), 2 * GIB).ctx
    assert 1.8 < q8 / f16 < 2.0 and 3.3 < q4 / f16 < 3.7


def test_the_trained_context_caps_it_and_the_note_says_so() -> None:
    got = auto_context(facts(trained=32768), 64 * GIB)
    assert got.ctx == 32768 and got.capped
    note = got.note("q8")
    assert note.startswith("context 32768 tokens (auto: the model's trained maximum; ")
    assert note.endswith("GiB free after weights, KV q8)") and "\n" not in note


def test_the_note_of_a_memory_bound_context() -> None:
    got = auto_context(facts(), int(1.5 * GIB))
    assert got.note("f16") == (
        f"context {got.ctx} tokens (auto: {got.free_bytes / GIB:.1f} GiB free after weights, "
        "KV f16)"
    )


@pytest.mark.parametrize("free", [0, 300 << 20, 770 << 20])
def test_too_little_memory_is_a_one_line_error(free: int) -> None:
    with pytest.raises(EngineError, match=r"^--ctx auto: \d+ MiB of RAM free") as info:
        auto_context(facts(), free)
    assert "\n" not in str(info.value) and "--ctx N" in str(info.value)


def test_facts_are_validated() -> None:
    with pytest.raises(EngineError):
        ContextFacts(weights_bytes=0, kv_bytes_per_token=0, trained_ctx=0)


def test_the_engine_resolves_auto_for_the_loaded_runner(monkeypatch: pytest.MonkeyPatch) -> None:
    """Engine.load sizes the context from the runner's own bytes per token and trained limit
    and reports the one line; the pool is allocated for that context."""
    from ember.engine.engine import Engine

    monkeypatch.setattr("ember.models.hub.fit.memory_bytes", lambda: (1 * GIB, 2 * GIB))
    engine = Engine.load(EngineOptions(model="fake", runner="fake", ctx=AUTO_CTX), None)
    try:
        limit = engine.runner.info.context_limit
        assert 0 < engine.ctx <= limit
        assert engine.info.context_note.startswith(f"context {engine.ctx} tokens (auto: ")
        per_token = engine.runner.info.kv_bytes_per_token
        assert engine.info.kv_cache_bytes == engine.blocks.num_blocks * 16 * per_token
    finally:
        engine.close()


def test_unknown_free_memory_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from ember.engine.engine import Engine

    monkeypatch.setattr("ember.models.hub.fit.memory_bytes", lambda: (None, None))
    with pytest.raises(EngineError, match="^--ctx auto: this system does not report"):
        Engine.load(EngineOptions(model="fake", runner="fake", ctx=AUTO_CTX), None)


def test_a_fixed_context_has_no_note() -> None:
    from ember.engine.engine import Engine

    engine = Engine.load(EngineOptions(model="fake", runner="fake", ctx=512), None)
    try:
        assert engine.info.context_note == "" and engine.ctx == 512
    finally:
        engine.close()
