"""The models the server serves for generation: which names a request may use, their cards,
and the loaded Backends (loaded_pool.py: on demand, keep_alive, LRU, unload now unless busy)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ember.app.server.errors import RequestInvalid
from ember.app.server.loaded_pool import LoadedPool, unknown_model_message
from ember.app.server.model_aliases import ModelAliases
from ember.engine.api import Backend, Health


class ModelPool(LoadedPool[Backend]):
    """Name -> loaded Backend; at most max_loaded stay loaded while idle (LRU)."""

    unknown_model_message = staticmethod(unknown_model_message)

    def __init__(
        self,
        load: Callable[[str], Backend],
        list_names: Callable[[], list[str]],
        default_model: str | None = None,
        max_loaded: int = 1,
        max_tokens_cap: int = 8192,
        is_served: Callable[[str], bool] | None = None,
        describe: Callable[[str], dict[str, Any]] | None = None,
        aliases: ModelAliases | None = None,
    ) -> None:
        super().__init__(load, self.resolve, max_loaded)
        self._list_names = list_names
        # which `model` values a request may name (default: the listed names); the operator's
        # opt-ins (paths, URLs) come in through serve.py
        self._is_served = is_served or (lambda name: name in self._list_names())
        self.default_model = default_model
        self.max_tokens_cap = max_tokens_cap
        self._describe = describe  # name -> {"size", "digest", "format", "family", ...}
        self.aliases = aliases or ModelAliases()  # --alias 'claude-*=MODEL'

    def names(self) -> list[str]:
        """Every model a request may name: registered ones and loaded ones."""
        return sorted(set(self._list_names()) | set(self.loaded()))

    def serves(self, name: str) -> bool:
        """Whether a request may name this model (loaded, registered or opted in)."""
        if not _encodable(name):  # a lone surrogate cannot be looked up (SQLite, paths)
            return False
        return name in self.loaded() or self._is_served(name)

    def resolve(self, requested: str | None) -> str:
        """The model a request names (the default when none), if this server serves it."""
        name = requested or self.default_model
        if not name:
            raise RequestInvalid("model", "no model named and the server has no default (--model)")
        if name.endswith(":latest") and not self.serves(name) and self.serves(name[:-7]):
            name = name[: -len(":latest")]  # Ollama's default tag: Ember's names carry none
        if not self.serves(name):
            target = self.aliases.target(name)
            if target is None or not self.serves(target):
                raise RequestInvalid("model", unknown_model_message(name), status=404)
            name = target
        return name

    def health(self) -> dict[str, Health]:
        """Each loaded model's backend health (Backend.health(): cheap, never blocks)."""
        return {name: backend.health() for name, backend in self.items()}

    def preload(self, name: str) -> None:
        """Load a model now (ember serve --model)."""
        self.get(name)
        self.release(name)

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
            card["expires_at"] = self.expires_at(name)
            card["size_vram"] = 0
        return card


def _encodable(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
