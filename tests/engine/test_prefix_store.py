from __future__ import annotations

import functools
import logging
from pathlib import Path

import pytest

from ember.engine.api import EngineOptions, GenerationRequest
from ember.engine.engine import Engine
from ember.engine.prefix_store import PrefixStore
from ember.engine.runners.fake import FakeRunner, fake_chat_ids
from tests.engine.helpers import fake_of, greedy, prompt_ids, run

SYSTEM = list(prompt_ids(64, salt=1))


def _engine(root: Path, seed: int = 0, max_bytes: int = 1 << 30) -> Engine:
    runner = FakeRunner(seed=seed)
    options = EngineOptions(model="fake", block_size=8, window=0, ctx=512)
    store = PrefixStore(
        root,
        model_digest=runner.info.model_digest,
        runner=runner.info.name,
        dtype=runner.info.dtype,
        block_size=8,
        max_bytes=max_bytes,
    )
    chat = functools.partial(fake_chat_ids, runner.tokenizer)
    return Engine(runner, options, chat=chat, prefix_store=store)


def _request(salt: int) -> GenerationRequest:
    return GenerationRequest(
        prompt_ids=tuple(SYSTEM + list(prompt_ids(5, salt))), sampling=greedy(12)
    )


def _cold(salt: int) -> tuple[int, ...]:
    engine = Engine(
        FakeRunner(),
        EngineOptions(model="fake", block_size=8, window=0, ctx=512, prefix_cache=False),
    )
    return run(engine, _request(salt)).token_ids


def test_fresh_process_restores_prefix_from_disk(tmp_path: Path) -> None:
    run(_engine(tmp_path), _request(2))
    assert len(list(tmp_path.rglob("*.kv"))) == 1
    fresh = _engine(tmp_path)  # a new engine: empty RAM cache, same model
    final = run(fresh, _request(3))
    assert final.stats.cached_tokens == 64
    assert final.token_ids == _cold(3)
    assert fake_of(fresh).num_forward_tokens == 5 + 11  # only the new tail and the decode steps


@pytest.mark.parametrize("damage", ["flip", "truncate", "header"])
def test_damaged_snapshot_is_ignored_with_warning(
    tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    run(_engine(tmp_path), _request(2))
    (path,) = tmp_path.rglob("*.kv")
    blob = bytearray(path.read_bytes())
    if damage == "flip":
        blob[len(blob) // 2] ^= 0x40
    elif damage == "truncate":
        blob = blob[: len(blob) - 100]
    else:
        blob[20:30] = b"#" * 10
    path.write_bytes(bytes(blob))
    with caplog.at_level(logging.WARNING, logger="ember.engine.prefix_store"):
        final = run(_engine(tmp_path), _request(3))
    assert "ignored" in caplog.text
    assert final.stats.cached_tokens == 0 and final.token_ids == _cold(3)
    assert not path.exists() or path.read_bytes() != bytes(blob)  # discarded, maybe rewritten


def test_other_model_snapshot_is_never_loaded(tmp_path: Path) -> None:
    run(_engine(tmp_path, seed=0), _request(2))
    other = _engine(tmp_path, seed=1)  # different model digest: its own folder, no hit
    assert run(other, _request(3)).stats.cached_tokens == 0
    (a, b) = sorted(p.parent for p in tmp_path.rglob("*.kv"))
    assert a != b
    # a file with the wrong identity copied into this model's folder is refused too
    store = other.prefix_store
    assert store is not None
    foreign = _engine(tmp_path, seed=0).prefix_store
    assert foreign is not None
    (src,) = foreign.folder.glob("*.kv")
    for existing in store.folder.glob("*.kv"):
        existing.unlink()
    (store.folder / src.name).write_bytes(src.read_bytes())
    assert run(_engine(tmp_path, seed=1), _request(4)).stats.cached_tokens == 0


def test_newer_turn_supersedes_older_snapshot_and_cap_evicts_lru(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    first = run(engine, _request(2))
    turn2 = GenerationRequest(
        prompt_ids=tuple(SYSTEM + list(prompt_ids(5, 2)) + list(first.token_ids) + [7] * 20),
        sampling=greedy(4),
    )
    run(engine, turn2)
    assert len(list(tmp_path.rglob("*.kv"))) == 1  # turn 2's snapshot contains turn 1's
    size = next(tmp_path.rglob("*.kv")).stat().st_size
    small = _engine(tmp_path / "capped", max_bytes=int(size * 1.5))
    run(small, _request(2))
    run(small, GenerationRequest(prompt_ids=tuple(prompt_ids(90, salt=9)), sampling=greedy(3)))
    assert len(list((tmp_path / "capped").rglob("*.kv"))) == 1
