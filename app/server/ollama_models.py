"""Ollama's model management on Ember's registry: /api/pull (Ember's verified, resumable
downloader, status streamed as NDJSON) and /api/delete (as `ember rm`; never a loaded model
that is serving a request)."""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

from ember.app.server.errors import RequestInvalid
from ember.app.server.io import next_event, plain_error, read_json
from ember.errors import EmberError

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from ember.app.server.pool import ModelPool
    from ember.app.server.security import Guard


def _status(event: Any) -> dict[str, Any]:
    from ember.models.hub.download import DownloadProgress
    from ember.models.hub.pull import PullResult

    if isinstance(event, DownloadProgress):
        return {
            "status": f"pulling {event.file}",
            "digest": event.file,
            "total": event.bytes_total,
            "completed": event.bytes_done,
        }
    if isinstance(event, PullResult):
        return {"status": "success", "model": event.record.name}
    return {"status": str(event)}


def _pull_lines(ref: str, cancel: threading.Event) -> Iterator[dict[str, Any]]:
    from ember.app.loading import open_registry
    from ember.models.hub.events import pull_events

    yield {"status": "pulling manifest"}
    try:
        for event in pull_events(ref, open_registry(), cancel=cancel):
            yield _status(event)
    except EmberError as exc:
        yield {"error": str(exc)}


def _name(body: Any) -> str:
    name = body.get("model") or body.get("name") if isinstance(body, dict) else None
    if not isinstance(name, str) or not 0 < len(name) <= 512:
        raise RequestInvalid("model", "must be a non-empty string", status=400)
    return name


def routes(pool: ModelPool, guard: Guard) -> list[Route]:
    from starlette.responses import JSONResponse, StreamingResponse
    from starlette.routing import Route

    async def pull(request: Request) -> Response:
        try:
            body = await read_json(request, guard.max_body_bytes)
            ref = _name(body)
            stream = body.get("stream", True)
            if not isinstance(stream, bool):
                raise RequestInvalid("stream", "must be a boolean", status=400)
        except RequestInvalid as exc:
            return plain_error(exc.status, str(exc))
        cancel = threading.Event()
        lines = _pull_lines(ref, cancel)
        if not stream:
            import anyio

            statuses = await anyio.to_thread.run_sync(list, lines)
            last = statuses[-1]
            return JSONResponse(last, status_code=400 if "error" in last else 200)

        async def body_iter() -> AsyncIterator[str]:
            try:
                while (line := await next_event(lines)) is not None:
                    yield json.dumps(line) + "\n"
            finally:
                cancel.set()  # the client went away: stop the transfer (the .part resumes)

        return StreamingResponse(body_iter(), media_type="application/x-ndjson")

    async def delete(request: Request) -> Response:
        from ember.app.loading import open_registry

        try:
            name = _name(await read_json(request, guard.max_body_bytes))
        except RequestInvalid as exc:
            return plain_error(exc.status, str(exc))
        registry = open_registry()
        record = registry.find(name)
        if record is None:
            return plain_error(404, pool.unknown_model_message(name))
        for loaded in (name, record.name):
            if loaded in pool.loaded() and not pool.unload(loaded):
                return plain_error(409, f"{name} is serving a request")
        registry.remove(record.name)
        return JSONResponse({})

    return [
        Route("/api/pull", pull, methods=["POST"]),
        Route("/api/delete", delete, methods=["DELETE"]),
    ]
