"""Where a running engine comes from: `load_engine` (a thread-owned Engine, or a RemoteBackend for
a remote server) and `load_embedder` (a llama.cpp embedding model).

The contracts they return live in engine/api.py and engine/embedding.py, which import no
implementation; this module sits above the implementations, so the arrows point one way. Callers in
app go through app/loading.py, which resolves the model files first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ember.engine.embedding import POOLINGS, CannotEmbed

if TYPE_CHECKING:
    from ember.engine.api import Backend, EngineOptions, ModelFiles
    from ember.engine.embedding import Embedder


def load_engine(
    options: EngineOptions,
    model: ModelFiles | None = None,
    *,
    draft_model: ModelFiles | None = None,
) -> Backend:
    """Load model and return a thread-owned engine (an EngineThread) behind the Backend API;
    a remote server (--remote URL or a URL model) gets a RemoteBackend instead.

    model: the resolved local model (None only for the fake runner and remote servers);
    draft_model: the resolved `--draft MODEL` when options.draft names a model. Callers in app
    go through load_backend in app/loading.py, which resolves both."""
    from ember.engine.remote.backend import RemoteBackend, remote_config

    remote = remote_config(options)
    if remote is not None:
        return RemoteBackend(remote)
    from ember.engine.engine_thread import start_engine_thread

    return start_engine_thread(options, model, draft_model=draft_model)


def load_embedder(options: EngineOptions, model: ModelFiles) -> Embedder:
    """Load a resolved GGUF model for embeddings on llama.cpp (CannotEmbed when it cannot)."""
    if model.format != "gguf":
        raise CannotEmbed(
            f"model {model.name}: embeddings run on GGUF models through llama.cpp (this is {model.format})"
        )
    if options.runner not in ("auto", "llama.cpp"):
        raise CannotEmbed(
            f"model {model.name}: the {options.runner} runner cannot embed; embeddings run on "
            "llama.cpp (--runner auto or llama.cpp)"
        )
    from ember.engine.runners.llamacpp.embedder import LlamaCppEmbedder
    from ember.models.files.gguf import open_gguf
    from ember.models.files.pooling import gguf_pooling

    declared = gguf_pooling(open_gguf(model.path).metadata)
    if declared == "rank":
        raise CannotEmbed(
            f"model {model.name} cannot embed: it is a reranker (its GGUF declares rank pooling)"
        )
    trained = declared in POOLINGS
    pooling = declared if declared in POOLINGS else "mean"  # none / undeclared: a chat model
    return LlamaCppEmbedder.load(
        model.path, options, name=model.name, pooling=pooling, trained=trained
    )
