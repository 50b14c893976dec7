"""Models the server has loaded for embeddings, loaded on demand by name, LRU-unloaded when idle.

An embedding context is not the generation engine's (runners/llamacpp/embedder.py says why),
so a model used for both chat and embeddings is loaded once for each. Which names a request may
use is the ModelPool's rule (the same registered names, --model and opt-ins), and a request
naming none gets the server's default model.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime

from ember.app.server.errors import RequestInvalid
from ember.app.server.pool import ModelPool
from ember.engine.embedding import Embedder
from ember.models.errors import RegistryError


class EmbedderPool:
    """Name -> loaded Embedder; at most max_loaded stay loaded while idle (LRU)."""

    def __init__(
        self, load: Callable[[str], Embedder], models: ModelPool, max_loaded: int = 1
    ) -> None:
        self._load = load
        self._models = models
        self.max_loaded = max_loaded
        self._loaded: OrderedDict[str, Embedder] = OrderedDict()
        self._active: dict[str, int] = {}
        self._expires: dict[str, float] = {}  # keep_alive deadlines (time.monotonic())
        self._lock = threading.Lock()
        self._load_locks: dict[str, threading.Lock] = {}

    def loaded(self) -> list[str]:
        return list(self._loaded)

    def expires_at(self, name: str) -> str:
        """When a loaded embedder's keep_alive ends (ISO 8601 UTC; far off when it has none)."""
        deadline = self._expires.get(name)
        left = (deadline - time.monotonic()) if deadline is not None else 10 * 365 * 86400
        expires = datetime.fromtimestamp(time.time() + max(0.0, left), UTC)
        return expires.isoformat().replace("+00:00", "Z")

    async def acquire(self, requested: str | None) -> tuple[str, Embedder]:
        """The embedder for a request's model (loaded in a worker thread); release() after."""
        import anyio

        name = requested or self._models.default_model
        if not name:
            raise RequestInvalid("model", "no model named and the server has no default (--model)")
        if not self._models.serves(name):
            raise RequestInvalid("model", self._models.unknown_model_message(name), status=404)
        return name, await anyio.to_thread.run_sync(self._get, name)

    def _get(self, name: str) -> Embedder:
        with self._lock:
            lock = self._load_locks.setdefault(name, threading.Lock())
        with lock:  # one load per name at a time; others wait and reuse it
            with self._lock:
                embedder = self._loaded.get(name)
                if embedder is not None:
                    self._loaded.move_to_end(name)
                    self._active[name] = self._active.get(name, 0) + 1
                    return embedder
            try:
                embedder = self._load(name)
            except RegistryError:
                message = self._models.unknown_model_message(name)
                raise RequestInvalid("model", message, status=404) from None
            with self._lock:
                self._loaded[name] = embedder
                self._active[name] = self._active.get(name, 0) + 1
                self._unload_idle()
            return embedder

    def release(self, name: str, keep_alive_s: float | None = None) -> None:
        """A request is done with name; keep_alive_s as ModelPool.release (0: unload now)."""
        with self._lock:
            self._active[name] = max(0, self._active.get(name, 0) - 1)
            if keep_alive_s is not None:
                if keep_alive_s < 0:
                    self._expires.pop(name, None)
                else:
                    self._expires[name] = time.monotonic() + keep_alive_s
                    if keep_alive_s > 0:
                        timer = threading.Timer(keep_alive_s + 0.05, self.sweep)
                        timer.daemon = True
                        timer.start()
            self._unload_idle()
        self.sweep()

    def sweep(self) -> None:
        """Unload idle embedders whose keep_alive deadline has passed."""
        now = time.monotonic()
        with self._lock:
            for name, deadline in list(self._expires.items()):
                if deadline <= now and self._active.get(name, 0) == 0 and name in self._loaded:
                    self._loaded.pop(name).close()
                    del self._expires[name]

    def unload(self, name: str) -> bool:
        """Unload name now if it is loaded and idle (ember stop); whether it was unloaded."""
        with self._lock:
            if name not in self._loaded or self._active.get(name, 0):
                return False
            self._loaded.pop(name).close()
            self._expires.pop(name, None)
            return True

    def _unload_idle(self) -> None:
        for other in list(self._loaded):
            if len(self._loaded) <= self.max_loaded:
                break
            if self._active.get(other, 0) == 0:
                self._loaded.pop(other).close()

    def close(self) -> None:
        with self._lock:
            for embedder in self._loaded.values():
                embedder.close()
            self._loaded.clear()
