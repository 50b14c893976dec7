"""The models the server has loaded for embeddings (loaded_pool.py: on demand, keep_alive, LRU,
unload now unless busy).

An embedding context is not the generation engine's (runners/llamacpp/embedder.py says why),
so a model used for both chat and embeddings is loaded once for each. Which names a request may
use is the ModelPool's rule (the same registered names, --model and opt-ins), and a request
naming none gets the server's default model.
"""

from __future__ import annotations

from collections.abc import Callable

from ember.app.server.loaded_pool import LoadedPool
from ember.app.server.pool import ModelPool
from ember.engine.embedding import Embedder


class EmbedderPool(LoadedPool[Embedder]):
    """Name -> loaded Embedder; at most max_loaded stay loaded while idle (LRU)."""

    def __init__(
        self, load: Callable[[str], Embedder], models: ModelPool, max_loaded: int = 1
    ) -> None:
        super().__init__(load, models.resolve, max_loaded)
