"""HTTP plumbing shared by the OpenAI and Ollama routes: bounded JSON bodies, errors, events."""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING, Any

from ember.app.server.errors import RequestInvalid
from ember.text import escape

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from ember.engine.api import Finished, RequestHandle


def error_response(status: int, message: str, param: str | None = None) -> Response:
    """OpenAI's error shape (Ollama clients read `error` as a string or an object alike)."""
    from starlette.responses import JSONResponse

    kind = "invalid_request_error" if status < 500 else "server_error"
    # a message can echo the client's own text: one line, and no lone surrogate (unencodable)
    shown = None if param is None else escape(param)
    body = {"error": {"message": escape(message), "type": kind, "param": shown, "code": status}}
    return JSONResponse(body, status_code=status)


def plain_error(status: int, message: str) -> Response:
    """Ollama's error shape, {"error": "..."}, escaped to one line like error_response."""
    from starlette.responses import JSONResponse

    return JSONResponse({"error": escape(message)}, status_code=status)


async def read_json(request: Request, limit: int) -> Any:
    """The body as JSON, at most limit bytes (counted while reading: chunked bodies too)."""
    from starlette.requests import ClientDisconnect

    size = 0
    chunks: list[bytes] = []
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise RequestInvalid("body", f"request body exceeds {limit} bytes", status=413)
            chunks.append(chunk)
    except ClientDisconnect:  # the client gave up mid-upload: nothing to answer, no traceback
        raise RequestInvalid("body", "the client disconnected", status=400) from None
    try:
        return json.loads(b"".join(chunks) or b"null")
    except RecursionError:
        raise RequestInvalid("body", "JSON nested too deeply", status=400) from None
    except (ValueError, UnicodeDecodeError):
        raise RequestInvalid("body", "not valid JSON", status=400) from None


async def next_event(iterator: Any) -> Any:
    """The next event of a handle's iterator, waited for in a worker thread (None at the end)."""
    import anyio

    return await anyio.to_thread.run_sync(
        functools.partial(next, iterator, None), abandon_on_cancel=True
    )


async def finish_or_abort(handle: RequestHandle, request: Request) -> Finished:
    """The request's Finished event for a non-streamed reply; if the client goes away first
    (even mid-prefill, when no event comes for a long time) the request is aborted at once, so
    no work goes on for nobody. Every non-streamed route waits through here."""
    import anyio

    from ember.engine.api import Finished

    async def watch() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass
        handle.abort()  # the engine ends it with reason "abort": the loop below sees it

    iterator = iter(handle)
    async with anyio.create_task_group() as group:
        group.start_soon(watch)
        try:
            while (event := await next_event(iterator)) is not None:
                if isinstance(event, Finished):
                    return event
        finally:
            group.cancel_scope.cancel()
            handle.abort()  # no-op once finished
    return handle.result()
