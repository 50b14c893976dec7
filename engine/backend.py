"""The Backend protocol the CLI, TUI and server talk to (the local engine thread, a remote
server and the fakes implement it), with what it reports: EngineInfo and Health. Part of the
contract engine/api.py gathers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

from ember.engine.events import RequestHandle
from ember.engine.request import GenerationRequest


@dataclass(frozen=True)
class EngineInfo:
    """What is loaded, for status bars and `--json` output."""

    model: str
    runner: str
    device: str
    architecture: str
    context_limit: int
    features: dict[str, bool] = field(default_factory=dict)  # sink_window, prefix_cache, draft...
    tool_format: str = "generic"  # how the model writes tool calls (models/text/tool_calls)
    kv_cache: str = ""  # the KV cache type asked for: f16 | q8 | q4 (models/quants/kv_cache)
    kv_element: str = ""  # how the runner stores it: float16, bfloat16, int8, q8_0, q4_0...
    kv_cache_bytes: int = 0  # the KV pool the runner allocated (all layers, K and V)
    context_note: str = ""  # one line on how the context was chosen (`--ctx auto`), else ""


HealthStatus = Literal["ok", "wedged", "dead", "closed"]


@dataclass(frozen=True)
class Health:
    """Whether a backend can serve requests now (the server's /health reports it).

    ok: serving (possibly busy). wedged: one engine step (or call) has run longer than the
    backend's limit, so new requests would wait behind it. dead: the engine cannot serve any more
    (its thread ended, or it failed beyond recovery); every new request fails at once with
    `detail`. closed: close() was called.
    """

    status: HealthStatus = "ok"
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class Backend(Protocol):
    """What the CLI, TUI and server need from an engine (a fake backend implements it too)."""

    @property
    def info(self) -> EngineInfo: ...

    def submit(self, request: GenerationRequest) -> RequestHandle: ...

    def count_tokens(self, request: GenerationRequest) -> int: ...

    def health(self) -> Health:
        """Liveness: cheap, never blocks, callable from any thread."""
        ...

    def close(self) -> None: ...
