"""The packed-weight cache: a second load maps the converted weights and computes the same
logits; a damaged cache file is ignored with a warning and rewritten; pruning is LRU."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ember.engine.runners.torch.packed_cache import PackedCache, cache_key, default_dir, prune
from ember.engine.runners.torch.runner import TorchOptions, TorchRunner

from .helpers import decode_logits

OPTS = TorchOptions(device="cpu", threads=1, kernels="torch")  # the native path converts nothing


def _logits(path: Path) -> np.ndarray:
    runner = TorchRunner.load(path, OPTS)
    ids = [int(x) for x in np.random.default_rng(3).integers(0, runner.info.vocab_size, 24)]
    return decode_logits(runner, ids, prefill=8)


@pytest.mark.parametrize("quant", ["Q4_K_M", "Q8_0"])
def test_second_load_maps_the_cache_and_matches(
    tiny_models: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, quant: str
) -> None:
    monkeypatch.setenv("EMBER_PACKED_CACHE", str(tmp_path / "packed"))
    path = tiny_models.gguf("gemma3", quant)
    first = _logits(path)
    files = list((tmp_path / "packed").glob("*.pt"))
    assert len(files) == 1
    opened = PackedCache.open(tmp_path / "packed", files[0].stem)
    assert opened.found is not None and "token_embd" in opened.found  # the tied head is cached
    np.testing.assert_array_equal(_logits(path), first)


def test_damaged_cache_is_ignored_with_a_warning_and_rewritten(
    tiny_models: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    monkeypatch.setenv("EMBER_PACKED_CACHE", str(tmp_path / "packed"))
    path = tiny_models.gguf("llama", "Q4_K_M")
    first = _logits(path)
    (entry,) = (tmp_path / "packed").glob("*.pt")
    entry.write_bytes(entry.read_bytes()[: entry.stat().st_size // 2])  # truncated
    with caplog.at_level(logging.WARNING):
        np.testing.assert_array_equal(_logits(path), first)
    assert "packed-weight cache ignored" in caplog.text and str(entry) in caplog.text
    assert PackedCache.open(tmp_path / "packed", entry.stem).found is not None  # rewritten
    assert not list((tmp_path / "packed").glob(".*.tmp"))


def test_off_disables_the_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("EMBER_PACKED_CACHE", "off")
    assert default_dir() is None
    monkeypatch.delenv("EMBER_PACKED_CACHE")
    monkeypatch.setenv("EMBER_HOME", str(tmp_path))
    assert default_dir() == tmp_path / "cache" / "packed"


def test_key_follows_file_and_options(tmp_path: Path) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"x" * 100)
    key = cache_key(model, "digest", "bf16|auto|auto")
    assert key == cache_key(model, "digest", "bf16|auto|auto")
    assert key != cache_key(model, "digest", "bf16|int4|auto")
    os.utime(model, ns=(1, 1))
    assert key != cache_key(model, "digest", "bf16|auto|auto")


def test_prune_drops_least_recently_used(tmp_path: Path) -> None:
    for i, name in enumerate(("old", "mid", "new")):
        f = tmp_path / f"{name}.pt"
        f.write_bytes(b"x" * 100)
        os.utime(f, ns=(i * 10**9, i * 10**9))
    stale, fresh = tmp_path / ".x.pt.1.tmp", tmp_path / ".y.pt.2.tmp"
    stale.write_bytes(b"x")
    fresh.write_bytes(b"x")
    os.utime(stale, ns=(0, 0))
    prune(tmp_path, 200)
    assert sorted(p.stem for p in tmp_path.glob("*.pt")) == ["mid", "new"]
    assert not stale.exists() and fresh.exists()  # a writer may still be using a fresh one
