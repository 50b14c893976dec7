"""Models the server has loaded, loaded on demand by name, with idle ones unloaded first."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

from ember.app.server.schema import RequestInvalid
from ember.engine.api import Backend, Health
from ember.models.errors import RegistryError


class ModelPool:
    """Name -> loaded Backend; at most max_loaded stay loaded while idle (LRU)."""

    def __init__(
        self,
        load: Callable[[str], Backend],
        list_names: Callable[[], list[str]],
        default_model: str | None = None,
        max_loaded: int = 1,
        max_tokens_cap: int = 8192,
    ) -> None:
        self._load = load
        self._list_names = list_names
        self.default_model = default_model
        self.max_loaded = max_loaded
        self.max_tokens_cap = max_tokens_cap
        self._loaded: OrderedDict[str, Backend] = OrderedDict()
        self._active: dict[str, int] = {}
        self._lock = threading.Lock()
        self._load_locks: dict[str, threading.Lock] = {}

    def names(self) -> list[str]:
        """Every model a request may name: registered ones and loaded ones."""
        return sorted(set(self._list_names()) | set(self._loaded))

    def loaded(self) -> list[str]:
        return list(self._loaded)

    def health(self) -> dict[str, Health]:
        """Each loaded model's backend health (Backend.health(): cheap, never blocks)."""
        with self._lock:
            backends = list(self._loaded.items())
        return {name: backend.health() for name, backend in backends}

    def preload(self, name: str) -> None:
        """Load a model now (ember serve --model)."""
        self._get(name)
        self.release(name)

    async def acquire(self, requested: str | None) -> tuple[str, Backend]:
        """The backend for a request's model (loading it in a worker thread); release() after."""
        import anyio

        name = requested or self.default_model
        if not name:
            raise RequestInvalid("model", "no model named and the server has no default (--model)")
        return name, await anyio.to_thread.run_sync(self._get, name)

    def _get(self, name: str) -> Backend:
        with self._lock:
            lock = self._load_locks.setdefault(name, threading.Lock())
        with lock:  # one load per name at a time; others wait and reuse it
            with self._lock:
                backend = self._loaded.get(name)
                if backend is not None:
                    self._loaded.move_to_end(name)
                    self._active[name] = self._active.get(name, 0) + 1
                    return backend
            try:
                backend = self._load(name)
            except RegistryError as exc:
                raise RequestInvalid("model", str(exc), status=404) from None
            with self._lock:
                self._loaded[name] = backend
                self._active[name] = self._active.get(name, 0) + 1
                self._unload_idle()
            return backend

    def _unload_idle(self) -> None:
        for other in list(self._loaded):
            if len(self._loaded) <= self.max_loaded:
                break
            if self._active.get(other, 0) == 0:
                self._loaded.pop(other).close()

    def release(self, name: str) -> None:
        with self._lock:
            self._active[name] = max(0, self._active.get(name, 0) - 1)
            self._unload_idle()

    def close(self) -> None:
        with self._lock:
            for backend in self._loaded.values():
                backend.close()
            self._loaded.clear()
