"""Models the server has loaded, loaded on demand by name, with idle ones unloaded first."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from ember.app.server.errors import RequestInvalid
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
        is_served: Callable[[str], bool] | None = None,
        describe: Callable[[str], dict[str, Any]] | None = None,
    ) -> None:
        self._load = load
        self._list_names = list_names
        # which `model` values a request may name (default: the listed names); the operator's
        # opt-ins (paths, URLs) come in through serve.py
        self._is_served = is_served or (lambda name: name in self._list_names())
        self.default_model = default_model
        self.max_loaded = max_loaded
        self.max_tokens_cap = max_tokens_cap
        self._describe = describe  # name -> {"size", "digest", "format", "family", ...}
        self._loaded: OrderedDict[str, Backend] = OrderedDict()
        self._expires: dict[str, float] = {}  # keep_alive deadlines (time.monotonic())
        self._active: dict[str, int] = {}
        self._lock = threading.Lock()
        self._load_locks: dict[str, threading.Lock] = {}

    def names(self) -> list[str]:
        """Every model a request may name: registered ones and loaded ones."""
        return sorted(set(self._list_names()) | set(self._loaded))

    @staticmethod
    def unknown_model_message(name: str) -> str:
        """The one answer for every model this server does not serve (no file-existence hints)."""
        shown = name if len(name) <= 80 else name[:77] + "..."
        return f"model {shown!r} is not served here; GET /v1/models lists the models it serves"

    def serves(self, name: str) -> bool:
        """Whether a request may name this model (loaded, registered or opted in)."""
        return name in self._loaded or self._is_served(name)

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
        if not self.serves(name):
            raise RequestInvalid("model", self.unknown_model_message(name), status=404)
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
            except RegistryError:
                raise RequestInvalid(
                    "model", self.unknown_model_message(name), status=404
                ) from None
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

    def release(self, name: str, keep_alive_s: float | None = None) -> None:
        """A request is done with name; keep_alive_s (Ollama's keep_alive): 0 unloads it once
        idle, > 0 unloads it that long after, < 0 keeps it; None leaves the deadline as is."""
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
        """Unload idle models whose keep_alive deadline has passed."""
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

    def describe(self, name: str, loaded: bool = False) -> dict[str, Any]:
        """An Ollama-style model card (/api/tags, /api/ps)."""
        info = self._describe(name) if self._describe else {}
        card: dict[str, Any] = {
            "name": name,
            "model": name,
            "modified_at": info.get("modified_at", "1970-01-01T00:00:00Z"),
            "size": int(info.get("size", 0)),
            "digest": str(info.get("digest", "")),
            "details": {
                "format": info.get("format", "gguf"),
                "family": info.get("family", ""),
                "families": [info["family"]] if info.get("family") else None,
                "parameter_size": info.get("parameter_size", ""),
                "quantization_level": info.get("quantization_level", ""),
            },
        }
        if loaded:
            deadline = self._expires.get(name)
            left = (deadline - time.monotonic()) if deadline is not None else 10 * 365 * 86400
            expires = datetime.fromtimestamp(time.time() + max(0.0, left), UTC)
            card["expires_at"] = expires.isoformat().replace("+00:00", "Z")
            card["size_vram"] = 0
        return card

    def close(self) -> None:
        with self._lock:
            for backend in self._loaded.values():
                backend.close()
            self._loaded.clear()
