"""OpenAI-compatible HTTP API on 127.0.0.1: /v1/models, /v1/chat/completions, /v1/completions, /health.

Requests go to a Backend (the engine thread, which batches concurrent requests); a model named
in a request is loaded on demand through the ModelPool. Streaming responses are server-sent
events; a client that disconnects aborts its request, which frees its KV blocks.
"""

from __future__ import annotations

import contextlib
import functools
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from ember.app.server.pool import ModelPool
from ember.app.server.schema import ParsedRequest, RequestInvalid, parse_chat, parse_completion
from ember.app.server.security import Guard
from ember.engine.api import Backend, Finished, RequestHandle, TextDelta
from ember.errors import EmberError

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

# OpenAI finish_reason of each engine reason. "loop" (the loop detector cut a reply that was
# repeating itself) is "length": the reply was cut short, the model did not end it (README).
FINISH = {"stop": "stop", "length": "length", "loop": "length", "abort": "stop", "error": "stop"}


def _error(status: int, message: str, param: str | None = None) -> Response:
    from starlette.responses import JSONResponse

    kind = "invalid_request_error" if status < 500 else "server_error"
    body = {"error": {"message": message, "type": kind, "param": param, "code": status}}
    return JSONResponse(body, status_code=status)


async def _read_json(request: Request, limit: int) -> Any:
    size = 0
    chunks: list[bytes] = []
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise RequestInvalid("body", f"request body exceeds {limit} bytes", status=413)
        chunks.append(chunk)
    try:
        return json.loads(b"".join(chunks) or b"null")
    except (ValueError, UnicodeDecodeError):
        raise RequestInvalid("body", "not valid JSON", status=400) from None


async def _next_event(iterator: Any) -> Any:
    import anyio

    return await anyio.to_thread.run_sync(
        functools.partial(next, iterator, None), abandon_on_cancel=True
    )


def _usage(fin: Finished) -> dict[str, int]:
    prompt, completion = fin.stats.prompt_tokens, fin.stats.generated_tokens
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


class _Completion:
    """One request's response in the chat or the plain-completion shape."""

    def __init__(self, chat: bool, model: str) -> None:
        self.chat = chat
        self.model = model
        self.id = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24]
        self.created = int(time.time())

    def _envelope(self, chunk: bool) -> dict[str, Any]:
        kind = "chat.completion" if self.chat else "text_completion"
        return {
            "id": self.id,
            "object": kind + (".chunk" if chunk and self.chat else ""),
            "created": self.created,
            "model": self.model,
        }

    def chunk(self, text: str | None, finish: str | None, first: bool = False) -> dict[str, Any]:
        body = self._envelope(chunk=True)
        if self.chat:
            delta: dict[str, Any] = {"role": "assistant"} if first else {}
            if text:
                delta["content"] = text
            body["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
        else:
            body["choices"] = [{"index": 0, "text": text or "", "finish_reason": finish}]
        return body

    def whole(self, fin: Finished) -> dict[str, Any]:
        body = self._envelope(chunk=False)
        choice: dict[str, Any] = {"index": 0, "finish_reason": FINISH[fin.reason]}
        if self.chat:
            choice["message"] = {"role": "assistant", "content": fin.text}
        else:
            choice["text"] = fin.text
        body["choices"] = [choice]
        body["usage"] = _usage(fin)
        return body


async def _stream(
    handle: RequestHandle, out: _Completion, include_usage: bool
) -> AsyncIterator[str]:
    iterator = iter(handle)
    finished = False
    try:
        yield f"data: {json.dumps(out.chunk(None, None, first=True))}\n\n"
        while (event := await _next_event(iterator)) is not None:
            if isinstance(event, TextDelta) and event.text:
                yield f"data: {json.dumps(out.chunk(event.text, None))}\n\n"
            elif isinstance(event, Finished):
                finished = True
                if event.reason == "error":
                    err = {"error": {"message": event.error, "type": "server_error", "code": 500}}
                    yield f"data: {json.dumps(err)}\n\n"
                yield f"data: {json.dumps(out.chunk(None, FINISH[event.reason]))}\n\n"
                if include_usage:
                    usage = out.chunk(None, None) | {"choices": [], "usage": _usage(event)}
                    yield f"data: {json.dumps(usage)}\n\n"
        yield "data: [DONE]\n\n"
    finally:
        if not finished:
            handle.abort()  # the client went away: stop generating and free the KV blocks


async def _whole(handle: RequestHandle, request: Request) -> Finished:
    iterator = iter(handle)
    try:
        while (event := await _next_event(iterator)) is not None:
            if isinstance(event, Finished):
                return event
            if await request.is_disconnected():
                break
    finally:
        handle.abort()  # no-op once finished
    return handle.result()


def _make_endpoint(pool: ModelPool, guard: Guard, chat: bool) -> Callable[[Request], Any]:
    parse = parse_chat if chat else parse_completion

    async def endpoint(request: Request) -> Response:
        from starlette.responses import JSONResponse, StreamingResponse

        try:
            body = await _read_json(request, guard.max_body_bytes)
            parsed: ParsedRequest = parse(body, max_tokens_cap=pool.max_tokens_cap)
            name, backend = await pool.acquire(parsed.model)
        except RequestInvalid as exc:
            return _error(exc.status, str(exc), exc.param)
        except EmberError as exc:  # the model exists but failed to load
            return _error(503, str(exc), "model")
        try:
            handle = backend.submit(parsed.request)
        except EmberError as exc:
            pool.release(name)
            return _error(422, str(exc))
        out = _Completion(chat, name)
        if parsed.stream:

            async def body_iter() -> AsyncIterator[str]:
                try:
                    async for piece in _stream(handle, out, parsed.include_usage):
                        yield piece
                finally:
                    pool.release(name)

            return StreamingResponse(body_iter(), media_type="text/event-stream")
        try:
            fin = await _whole(handle, request)
        finally:
            pool.release(name)
        if fin.reason == "error":
            return _error(500, fin.error or "generation failed")
        return JSONResponse(out.whole(fin))

    return endpoint


def _guard_middleware(app: Any, guard: Guard) -> Any:
    async def middleware(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = {
                k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]
            }
            refusal = guard.check(headers, scope["path"])
            if refusal is not None:
                await _error(refusal[0], refusal[1])(scope, receive, send)
                return
        await app(scope, receive, send)

    return middleware


def create_app(pool: ModelPool, guard: Guard) -> Starlette:
    """The ASGI app: routes plus the Host/Origin/key/size guard in front of them."""
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def models(request: Request) -> JSONResponse:
        data = [
            {"id": n, "object": "model", "created": 0, "owned_by": "ember"} for n in pool.names()
        ]
        return JSONResponse({"object": "list", "data": data})

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "loaded": pool.loaded()})

    routes = [
        Route("/health", health, methods=["GET"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/v1/chat/completions", _make_endpoint(pool, guard, chat=True), methods=["POST"]),
        Route("/v1/completions", _make_endpoint(pool, guard, chat=False), methods=["POST"]),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        pool.close()

    return Starlette(
        routes=routes, lifespan=lifespan, middleware=[Middleware(_GuardWrapper, guard=guard)]
    )


class _GuardWrapper:
    """Starlette middleware adapter for the guard (runs before routing, before the body is read)."""

    def __init__(self, app: Any, guard: Guard) -> None:
        self._inner = _guard_middleware(app, guard)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        await self._inner(scope, receive, send)


__all__ = ["Backend", "Guard", "ModelPool", "create_app"]
