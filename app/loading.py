"""From a model reference to a loaded model: the one place app resolves what the engine loads.

A reference (a registry name or alias, `gemma3-270m`, a .gguf path, a safetensors folder, a
registry entry of kind remote, or a server URL) is resolved here through the registry: local
models become a ModelFiles (path, format and the registry's digest), remote entries become
`remote_url` + model name on the EngineOptions. The engine gets only resolved descriptions;
it never opens the registry, reads settings or computes paths.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from ember.paths import Paths, get_paths

if TYPE_CHECKING:
    from ember.engine.api import Backend, EngineOptions, ModelFiles, ModelFormat
    from ember.engine.embedding import Embedder
    from ember.engine.prompt import ChatRenderer
    from ember.engine.runners.base import Runner
    from ember.models.registry.registry import Registry, ResolvedModel

_URL_PREFIXES = ("http://", "https://")


def open_registry(paths: Paths | None = None) -> Registry:
    """The local model index under paths (default: ember.paths.get_paths())."""
    from ember.models.registry.registry import Registry

    paths = paths or get_paths()
    return Registry(paths.registry_db, paths.models_dir)


def model_files(resolved: ResolvedModel, registry: Registry) -> ModelFiles:
    """What the engine loads for a resolved local model: its path, format and digest."""
    from ember.engine.api import ModelFiles
    from ember.models.errors import RegistryError

    if resolved.format not in ("gguf", "safetensors"):
        raise RegistryError(f"{resolved.name}: a {resolved.format} model has no local files")
    fmt: ModelFormat = "gguf" if resolved.format == "gguf" else "safetensors"
    return ModelFiles(resolved.name, resolved.path, fmt, registry.digest(resolved.path, fmt))


def resolve_files(ref: str, registry: Registry | None = None) -> ModelFiles:
    """A local model reference -> ModelFiles (RegistryError names an unknown reference)."""
    registry = registry or open_registry()
    return model_files(registry.resolve(ref), registry)


def _is_remote(options: EngineOptions) -> bool:
    return (
        options.runner == "remote"
        or bool(options.remote_url)
        or options.model.startswith(_URL_PREFIXES)
    )


def resolve_options(
    options: EngineOptions, registry: Registry | None = None
) -> tuple[EngineOptions, ModelFiles | None, ModelFiles | None]:
    """(options, model, draft_model) for the engine: the model and a `--draft MODEL` resolved;
    a registry entry of kind remote turns into remote_url + its name (model None)."""
    from ember.engine.speculative.choice import DRAFT_CHOICES

    if options.runner == "fake" or _is_remote(options):
        return options, None, None
    registry = registry or open_registry()
    resolved = registry.resolve(options.model)
    if resolved.format == "remote":
        remote = dataclasses.replace(options, model=resolved.name, remote_url=str(resolved.url))
        return remote, None, None
    model = model_files(resolved, registry)
    draft = None
    choice = options.draft.strip() or "none"
    if choice not in DRAFT_CHOICES:
        draft = resolve_files(choice, registry)
    return options, model, draft


def mark_used(model: ModelFiles | None, registry: Registry | None = None) -> None:
    """Record that a registered model was just loaded (`ember list` and the picker sort by it);
    an unregistered path marks nothing, even when its name matches a registered model's."""
    if model is None:
        return
    registry = registry or open_registry()
    record = registry.find(model.name)
    if record is not None and record.path == model.path:
        registry.touch_last_used(record.name)


def load_backend(options: EngineOptions) -> Backend:
    """Resolve options.model (and its draft model), load it, mark it used: the BackendFactory of
    the TUI, `ember run` and `ember serve`."""
    from ember.engine.load import load_engine

    registry = None if options.runner == "fake" or _is_remote(options) else open_registry()
    resolved, model, draft = resolve_options(options, registry)
    backend = load_engine(resolved, model, draft_model=draft)
    mark_used(model, registry)
    return backend


def load_embedding_model(options: EngineOptions) -> Embedder:
    """Resolve options.model and load it for embeddings (`ember serve`'s /v1/embeddings and
    /api/embed); CannotEmbed for a remote server or a model llama.cpp cannot embed."""
    from ember.engine.embedding import CannotEmbed
    from ember.engine.load import load_embedder

    if options.runner == "fake" or _is_remote(options):
        raise CannotEmbed(f"model {options.model}: a remote server or fake runner has no embeddings")
    registry = open_registry()
    resolved, model, _draft = resolve_options(options, registry)
    if model is None:
        raise CannotEmbed(f"model {options.model}: a remote server has no embeddings here")
    embedder = load_embedder(resolved, model)
    mark_used(model, registry)
    return embedder


def load_runner(options: EngineOptions) -> tuple[Runner, ChatRenderer, str]:
    """The bare runner, chat renderer and name of options.model (`ember eval` scores with it)."""
    from ember.engine.errors import EngineError
    from ember.engine.runners.factory import load_parts

    if _is_remote(options):
        raise EngineError(f"model {options.model}: a remote server has no local runner")
    registry = None if options.runner == "fake" else open_registry()
    resolved, model, _draft = resolve_options(options, registry)
    if options.runner != "fake" and model is None:
        raise EngineError(f"model {options.model}: a remote server has no local runner")
    parts = load_parts(resolved, model)
    mark_used(model, registry)
    return parts
