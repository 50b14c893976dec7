"""Loaded things by name (chat engines, embedders): loaded on demand, kept while in use,
unloaded after keep_alive, when idle past max_loaded (least recently used first), or now on
request (ember stop) unless busy.

One implementation for ModelPool (Backends) and EmbedderPool (Embedders): each only says how a
name is loaded and which names a request may use (`resolve`).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Generic, Protocol, TypeVar

from ember.app.server.errors import RequestInvalid
from ember.models.errors import RegistryError

FAR_OFF_S = 10 * 365 * 86400  # the "expires" of a thing loaded with no keep_alive


class Loaded(Protocol):
    """What the pool holds: anything it can close."""

    def close(self) -> None: ...


T = TypeVar("T", bound=Loaded)


def unknown_model_message(name: str) -> str:
    """The one answer for every model this server does not serve (no file-existence hints)."""
    shown = name if len(name) <= 80 else name[:77] + "..."
    return f"model {shown!r} is not served here; GET /v1/models lists the models it serves"


class LoadedPool(Generic[T]):
    """Name -> loaded T; at most max_loaded stay loaded while idle (LRU)."""

    def __init__(
        self, load: Callable[[str], T], resolve: Callable[[str | None], str], max_loaded: int
    ) -> None:
        self._load = load
        self._resolve = resolve  # a request's model -> the name to load (RequestInvalid if not)
        self.max_loaded = max_loaded
        self._loaded: OrderedDict[str, T] = OrderedDict()
        self._expires: dict[str, float] = {}  # keep_alive deadlines (time.monotonic())
        self._active: dict[str, int] = {}
        self._lock = threading.Lock()
        self._load_locks: dict[str, threading.Lock] = {}

    def loaded(self) -> list[str]:
        return list(self._loaded)

    def items(self) -> list[tuple[str, T]]:
        """The loaded things (a snapshot)."""
        with self._lock:
            return list(self._loaded.items())

    async def acquire(self, requested: str | None) -> tuple[str, T]:
        """The thing for a request's model (loaded in a worker thread); release() after."""
        import anyio

        name = self._resolve(requested)
        return name, await anyio.to_thread.run_sync(self.get, name)

    def get(self, name: str) -> T:
        """Name's thing, loaded if need be, counted as in use until release(name)."""
        with self._lock:
            lock = self._load_locks.setdefault(name, threading.Lock())
        with lock:  # one load per name at a time; others wait and reuse it
            with self._lock:
                thing = self._loaded.get(name)
                if thing is not None:
                    self._loaded.move_to_end(name)
                    self._active[name] = self._active.get(name, 0) + 1
                    return thing
            try:
                thing = self._load(name)
            except RegistryError:
                raise RequestInvalid("model", unknown_model_message(name), status=404) from None
            with self._lock:
                self._loaded[name] = thing
                self._active[name] = self._active.get(name, 0) + 1
                self._unload_idle()
            return thing

    def _unload_idle(self) -> None:
        for other in list(self._loaded):
            if len(self._loaded) <= self.max_loaded:
                break
            if self._active.get(other, 0) == 0:
                self._loaded.pop(other).close()

    def release(self, name: str, keep_alive_s: float | None = None) -> None:
        """A request is done with name; keep_alive_s (Ollama's keep_alive): 0 unloads it once
        idle, > 0 unloads it that long after, < 0 keeps it; None leaves the deadline as is."""
        with self._lock:
            self._active[name] = max(0, self._active.get(name, 0) - 1)
            if keep_alive_s is not None:
                if not 0 <= keep_alive_s <= FAR_OFF_S:  # negative, huge or NaN: forever
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
        """Unload idle things whose keep_alive deadline has passed."""
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

    def expires_at(self, name: str) -> str:
        """When a loaded thing's keep_alive ends (ISO 8601 UTC; far off when it has none)."""
        deadline = self._expires.get(name)
        left = (deadline - time.monotonic()) if deadline is not None else FAR_OFF_S
        expires = datetime.fromtimestamp(time.time() + max(0.0, left), UTC)
        return expires.isoformat().replace("+00:00", "Z")

    def close(self) -> None:
        with self._lock:
            for thing in self._loaded.values():
                thing.close()
            self._loaded.clear()
