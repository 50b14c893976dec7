"""GET /metrics in Prometheus' text format (`ember serve --metrics`), named as llama-server
names them so its dashboards read Ember too.

Counted in one place for every API: the server's model loader is wrapped (metered()), so each
backend's request handles report their Finished event here, whichever route submitted them.
Gauges (KV cache use, requests running and waiting) are read from each loaded engine between
its steps when scraped.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ember.engine.api import Backend, Event, Finished, GenerationRequest, RequestHandle

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from ember.app.server.pool import ModelPool


@dataclass
class Totals:
    requests: int = 0
    failed: int = 0
    prompt_tokens: int = 0
    prompt_seconds: float = 0.0
    generated_tokens: int = 0
    generated_seconds: float = 0.0


class ServerMetrics:
    """Counters every finished request adds to (thread-safe)."""

    def __init__(self) -> None:
        self.totals = Totals()
        self._lock = threading.Lock()

    def snapshot(self) -> Totals:
        with self._lock:
            return replace(self.totals)

    def finished(self, fin: Finished) -> None:
        stats = fin.stats
        with self._lock:
            t = self.totals
            t.requests += 1
            t.failed += fin.reason == "error"
            t.prompt_tokens += stats.prompt_tokens - stats.cached_tokens  # tokens prefilled
            t.prompt_seconds += stats.ttft_s
            t.generated_tokens += stats.generated_tokens
            if stats.decode_tok_s > 0:
                t.generated_seconds += stats.generated_tokens / stats.decode_tok_s

    def metered(self, load: Callable[[str], Backend]) -> Callable[[str], Backend]:
        """A model loader whose backends report here."""
        return lambda name: MeteredBackend(load(name), self)


class MeteredHandle:
    """A request handle that reports its Finished event once (a request whose caller stopped
    reading before its end is not counted)."""

    def __init__(self, inner: RequestHandle, metrics: ServerMetrics) -> None:
        self.inner, self.metrics, self.reported = inner, metrics, False

    def _report(self, fin: Finished) -> None:
        if not self.reported:
            self.reported = True
            self.metrics.finished(fin)

    def __iter__(self) -> Iterator[Event]:
        for event in self.inner:
            if isinstance(event, Finished):
                self._report(event)
            yield event

    def abort(self) -> None:
        self.inner.abort()

    def result(self) -> Finished:
        fin = self.inner.result()
        self._report(fin)
        return fin


class MeteredBackend:
    """A Backend whose submitted requests are counted; everything else is the backend's."""

    def __init__(self, inner: Backend, metrics: ServerMetrics) -> None:
        self.inner, self.metrics = inner, metrics

    def submit(self, request: GenerationRequest) -> MeteredHandle:
        return MeteredHandle(self.inner.submit(request), self.metrics)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _engine_gauges(engine: Any) -> tuple[int, int, int, int]:
    blocks, scheduler = engine.blocks, engine.scheduler
    used_tokens = blocks.num_used_blocks * blocks.block_size
    return used_tokens, blocks.num_blocks, len(scheduler.running), len(scheduler.waiting)


async def gauges(pool: ModelPool) -> tuple[float, int, int, int]:
    """(KV cache use 0-1, KV tokens, requests running, waiting) over the loaded engines."""
    import anyio

    used = total = running = waiting = 0
    for _, backend in pool.items():
        call = getattr(backend, "call", None)
        if call is None:
            continue
        with anyio.move_on_after(2):  # a wedged engine does not hang the scrape
            tokens, blocks, run, wait = await anyio.to_thread.run_sync(
                call, _engine_gauges, abandon_on_cancel=True
            )
            used, total = used + tokens, total + blocks
            running, waiting = running + run, waiting + wait
    return (used / total if total else 0.0), used, running, waiting


def exposition(totals: Totals, kv: tuple[float, int, int, int]) -> str:
    t = totals
    rows = [
        ("llamacpp:prompt_tokens_total", "counter", "Prompt tokens prefilled", t.prompt_tokens),
        ("llamacpp:prompt_seconds_total", "counter", "Prefill time", t.prompt_seconds),
        ("llamacpp:tokens_predicted_total", "counter", "Tokens generated", t.generated_tokens),
        ("llamacpp:tokens_predicted_seconds_total", "counter", "Decode time", t.generated_seconds),
        ("llamacpp:prompt_tokens_seconds", "gauge", "Average prefill tok/s",
         t.prompt_tokens / t.prompt_seconds if t.prompt_seconds else 0.0),
        ("llamacpp:predicted_tokens_seconds", "gauge", "Average decode tok/s",
         t.generated_tokens / t.generated_seconds if t.generated_seconds else 0.0),
        ("llamacpp:kv_cache_usage_ratio", "gauge", "KV cache blocks in use (0-1)", kv[0]),
        ("llamacpp:kv_cache_tokens", "gauge", "Tokens the used KV blocks hold", kv[1]),
        ("llamacpp:requests_processing", "gauge", "Requests being generated", kv[2]),
        ("llamacpp:requests_deferred", "gauge", "Requests waiting for KV room", kv[3]),
        ("ember:requests_total", "counter", "Generation requests finished", t.requests),
        ("ember:requests_failed_total", "counter", "Generation requests that failed", t.failed),
    ]  # fmt: skip
    lines = []
    for name, kind, help_text, value in rows:
        lines += [f"# HELP {name} {help_text}.", f"# TYPE {name} {kind}", f"{name} {value}"]
    return "\n".join(lines) + "\n"


def routes(pool: ModelPool, metrics: ServerMetrics | None) -> list[Route]:
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    from ember.app.server.io import error_response

    async def endpoint(request: Request) -> Response:
        if metrics is None:
            return error_response(501, "metrics are off: start ember serve with --metrics")
        body = exposition(metrics.snapshot(), await gauges(pool))
        return PlainTextResponse(body, media_type="text/plain; version=0.0.4")

    return [Route("/metrics", endpoint, methods=["GET"])]
