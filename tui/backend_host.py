"""Holds the loaded Backend; loading a different model closes the old one first."""

from __future__ import annotations

import threading
from collections.abc import Callable

from ember.engine.api import Backend, EngineInfo, EngineOptions

BackendFactory = Callable[[EngineOptions], Backend]


class BackendHost:
    """Thread-safe: workers call `get(options)`; it loads at most one model at a time."""

    def __init__(self, factory: BackendFactory) -> None:
        self._factory = factory
        self._lock = threading.Lock()
        self._backend: Backend | None = None
        self._options: EngineOptions | None = None

    def get(
        self, options: EngineOptions, on_load: Callable[[Backend], object] | None = None
    ) -> Backend:
        """The backend for options, loading it (blocking) if another or none is loaded;
        on_load(backend) runs once for a backend this call loaded (not for one already there)."""
        with self._lock:
            if self._backend is not None and self._options == options:
                return self._backend
            if self._backend is not None:
                self._backend.close()
                self._backend = self._options = None
            self._backend = self._factory(options)
            self._options = options
            if on_load is not None:
                on_load(self._backend)
            return self._backend

    @property
    def info(self) -> EngineInfo | None:
        """What is loaded now, if anything."""
        backend = self._backend
        return backend.info if backend is not None else None

    def close(self) -> None:
        """Close the loaded backend."""
        with self._lock:
            if self._backend is not None:
                self._backend.close()
            self._backend = self._options = None
