"""app/loading.py: a model reference resolved once in app, one digest for every cache, the
registry marked used by app (never by the engine)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from ember.app.loading import (
    load_backend,
    load_runner,
    open_registry,
    resolve_files,
    resolve_options,
)
from ember.app.options import EngineFlags, engine_options
from ember.engine.api import EngineOptions, GenerationRequest, SamplingParams
from ember.models.errors import RegistryError
from ember.models.registry.probe import sha256_file
from ember.models.registry.store import ModelRecord
from ember.paths import get_paths


def _options(ref: str, **flags: Any) -> EngineOptions:
    return engine_options(ref, flags=EngineFlags(**flags))


def test_a_path_resolves_to_its_files_and_sha256(tiny_models: Any) -> None:
    path = tiny_models.gguf("llama", "Q8_0")
    files = resolve_files(str(path))
    assert (files.path, files.format, files.name) == (path, "gguf", path.stem)
    assert files.digest == sha256_file(path)


def test_a_safetensors_folder_digest_covers_every_file(tiny_models: Any) -> None:
    folder = tiny_models.hf_dir("llama")
    files = resolve_files(str(folder))
    assert files.format == "safetensors"
    assert files.digest == open_registry().digest(folder, "safetensors")
    assert files.digest != sha256_file(folder / "model.safetensors")


@pytest.mark.parametrize("runner", ["torch", "llama.cpp"])
def test_one_digest_keys_the_prefix_store_and_the_packed_cache(
    tiny_models: Any, runner: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EMBER_PACKED_CACHE", str(tmp_path / "packed"))
    # torch's kernels convert the weights into the packed cache; the native ones convert nothing
    monkeypatch.setenv("EMBER_NATIVE", "off")
    path = tiny_models.gguf("llama", "Q8_0")
    backend: Any = load_backend(_options(str(path), runner=runner, device="cpu", threads=1))
    try:
        engine = backend.engine
        digest = sha256_file(path)
        assert engine.runner.info.model_digest == digest
        assert engine.prefix_store.identity["model_digest"] == digest
        assert engine.prefix_store.folder.is_relative_to(get_paths().prefix_cache_dir)
        if runner == "torch":
            assert engine.runner.src.digest == digest
            assert len(list((tmp_path / "packed").glob("*.pt"))) == 1  # keyed by that digest
    finally:
        backend.close()


def test_loading_a_registered_model_marks_it_used(tiny_models: Any) -> None:
    path = tiny_models.gguf("llama", "Q8_0")
    registry = open_registry()
    registry.add_path(path, name="tiny")
    assert registry.get("tiny").last_used_at is None
    runner, _, name = load_runner(_options("tiny", runner="torch", device="cpu"))
    runner.close()
    assert name == "tiny" and registry.get("tiny").last_used_at is not None


def test_an_unregistered_path_marks_no_namesake(tiny_models: Any, tmp_path: Path) -> None:
    registry = open_registry()
    registry.add_path(tiny_models.gguf("llama", "Q8_0"), name="tiny")
    other = tmp_path / "tiny.gguf"  # the same default name, another file
    other.write_bytes(tiny_models.gguf("llama", "Q4_0").read_bytes())
    runner, _, name = load_runner(_options(str(other), runner="torch", device="cpu"))
    runner.close()
    assert name == "tiny" and registry.get("tiny").last_used_at is None


def test_a_registry_entry_of_kind_remote_becomes_remote_options() -> None:
    url = "http://127.0.0.1:9/v1"
    record = ModelRecord(name="my-server", path=Path(), format="remote", source_repo=url)
    open_registry().register(record)
    options, model, draft = resolve_options(_options("my-server"))
    assert (options.model, options.remote_url, model, draft) == ("my-server", url, None, None)
    from ember.engine.remote.backend import remote_config

    config = remote_config(options)
    assert config is not None and (config.url, config.model) == (url, "my-server")


def test_a_draft_model_is_resolved_by_app(tiny_models: Any) -> None:
    target, small = tiny_models.gguf("llama", "Q8_0"), tiny_models.gguf("llama", "Q4_0")
    _, model, draft = resolve_options(_options(str(target), draft=str(small)))
    assert model is not None and draft is not None
    assert (draft.path, draft.digest) == (small, sha256_file(small))
    for choice in ("auto", "none", "lookup", "self"):
        assert resolve_options(_options(str(target), draft=choice))[2] is None
    blank = dataclasses.replace(_options(str(target)), draft="")  # the engine reads it as none
    assert resolve_options(blank)[2] is None
    with pytest.raises(RegistryError, match="nope"):
        resolve_options(_options(str(target), draft="/nope/missing.gguf"))


def test_a_draft_model_drafts_through_load_backend(tiny_models: Any) -> None:
    path = tiny_models.gguf("llama", "Q8_0")
    options = _options(str(path), runner="torch", device="cpu", draft=str(path), draft_tokens=2)
    backend: Any = load_backend(options)
    try:
        sampling = SamplingParams(max_tokens=8, ignore_eos=True)
        done = backend.submit(GenerationRequest(prompt_ids=(1, 5, 9, 5, 9), sampling=sampling))
        assert done.result().stats.drafted_tokens > 0
    finally:
        backend.close()


def test_unknown_model_is_a_registry_error_naming_it() -> None:
    with pytest.raises(RegistryError, match="no-such-model"):
        load_backend(_options("no-such-model"))


def test_fake_and_remote_need_no_registry(tmp_path: Path) -> None:
    backend = load_backend(_options("anything", runner="fake"))
    backend.close()
    url_options = dataclasses.replace(_options("anything"), model="http://127.0.0.1:9/v1")
    assert resolve_options(url_options) == (url_options, None, None)
    assert not get_paths().registry_db.exists()
