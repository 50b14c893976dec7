"""The packed-weight cache: a second load maps the converted weights and computes the same
logits; a damaged cache file is ignored with a warning and rewritten; pruning is LRU."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ember.engine.api import ModelFiles
from ember.engine.runners.torch.packed_cache import PackedCache, cache_key, prune
from ember.engine.runners.torch.runner import TorchOptions, TorchRunner

from .helpers import decode_logits


def _logits(model: ModelFiles, packed: Path | None, digest: str | None = None) -> np.ndarray:
    # kernels=torch: the native path converts nothing, so it never uses the packed cache
    opts = TorchOptions(
        device="cpu", threads=1, packed_cache_dir=str(packed or ""), kernels="torch"
    )
    digest = model.digest if digest is None else digest
    runner = TorchRunner.load(model.path, opts, digest=digest)
    assert runner.info.model_digest == digest
    ids = [int(x) for x in np.random.default_rng(3).integers(0, runner.info.vocab_size, 24)]
    return decode_logits(runner, ids, prefill=8)


@pytest.mark.parametrize("quant", ["Q4_K_M", "Q8_0"])
def test_second_load_maps_the_cache_and_matches(
    tiny_models: Any, model_files: Callable[[Path], ModelFiles], tmp_path: Path, quant: str
) -> None:
    model = model_files(tiny_models.gguf("gemma3", quant))
    first = _logits(model, tmp_path / "packed")
    files = list((tmp_path / "packed").glob("*.pt"))
    assert len(files) == 1
    opened = PackedCache.open(tmp_path / "packed", files[0].stem)
    assert opened.found is not None and "token_embd" in opened.found  # the tied head is cached
    np.testing.assert_array_equal(_logits(model, tmp_path / "packed"), first)


def test_damaged_cache_is_ignored_with_a_warning_and_rewritten(
    tiny_models: Any, model_files: Callable[[Path], ModelFiles], tmp_path: Path, caplog: Any
) -> None:
    model = model_files(tiny_models.gguf("llama", "Q4_K_M"))
    first = _logits(model, tmp_path / "packed")
    (entry,) = (tmp_path / "packed").glob("*.pt")
    entry.write_bytes(entry.read_bytes()[: entry.stat().st_size // 2])  # truncated
    with caplog.at_level(logging.WARNING):
        np.testing.assert_array_equal(_logits(model, tmp_path / "packed"), first)
    assert "packed-weight cache ignored" in caplog.text and str(entry) in caplog.text
    assert PackedCache.open(tmp_path / "packed", entry.stem).found is not None  # rewritten
    assert not list((tmp_path / "packed").glob(".*.tmp"))


def test_the_model_digest_keys_the_cache(
    tiny_models: Any, model_files: Callable[[Path], ModelFiles], tmp_path: Path
) -> None:
    model = model_files(tiny_models.gguf("llama", "Q8_0"))
    _logits(model, tmp_path / "packed")
    _logits(model, tmp_path / "packed", digest="0" * 64)  # same file, another digest
    assert len(list((tmp_path / "packed").glob("*.pt"))) == 2


def test_no_folder_or_no_digest_means_no_cache(
    tiny_models: Any, model_files: Callable[[Path], ModelFiles], tmp_path: Path
) -> None:
    model = model_files(tiny_models.gguf("llama", "Q8_0"))
    _logits(model, None)
    _logits(model, tmp_path / "packed", digest="")  # a key needs the model's digest
    assert not (tmp_path / "packed").exists()


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
