"""OpenAI-compatible HTTP API on 127.0.0.1: /v1/models, /v1/chat/completions, /v1/completions,
/v1/embeddings (embeddings.py, with Ollama's /api/embed), /health.

Requests go to a Backend (the engine thread, which batches concurrent requests); a model named
in a request is loaded on demand through the ModelPool. Streaming responses are server-sent
events; a client that disconnects aborts its request, which frees its KV blocks.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from ember.app.server.choices import merged_whole, stream_many
from ember.app.server.io import error_response, finish_or_abort, next_event, read_json
from ember.app.server.openai import Completion
from ember.app.server.pool import ModelPool
from ember.app.server.schema import ParsedRequest, RequestInvalid, parse_chat, parse_completion
from ember.app.server.security import Guard
from ember.engine.api import Backend, Finished, TextDelta, TokenLogprob
from ember.errors import EmberError

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

    from ember.app.server.embedder_pool import EmbedderPool
    from ember.app.server.llamaserver.metrics import ServerMetrics
    from ember.engine.embedding import Embedder


_error = error_response
_read_json = read_json
_next_event = next_event


def _chunks(out: Completion, event: TextDelta | Finished) -> list[dict[str, Any]]:
    """The chunks one engine event of a choice releases (its end: the held text, an error
    object if it failed, the finish_reason chunk)."""
    if isinstance(event, TextDelta):
        if not (event.text or event.logprobs):
            return []
        return _with_logprobs(out, out.delta_chunks(event.text), event.logprobs)
    chunks = _with_logprobs(out, out.delta_chunks("", final=True))
    if event.reason == "error":
        status = 400 if event.refused else 500
        kind = "invalid_request_error" if event.refused else "server_error"
        chunks.append({"error": {"message": event.error, "type": kind, "code": status}})
    return [*chunks, out.final_chunk(event)]


def _with_logprobs(
    out: Completion, chunks: list[dict[str, Any]], logprobs: tuple[TokenLogprob, ...] = ()
) -> list[dict[str, Any]]:
    """chunks, the first carrying the logprobs of the tokens whose text they release."""
    if out.logprobs is None:
        return chunks
    out.logprobs.add(logprobs)
    return out.logprobs.attach(chunks)


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
            handles = [backend.submit(choice) for choice in parsed.choices]
        except EmberError as exc:
            pool.release(name)
            return _error(400, str(exc))
        parse_tools = bool(parsed.request.offered_tools)
        wants_logprobs = parsed.request.sampling.logprobs
        fmt = backend.info.tool_format
        outs = [
            Completion(chat, name, fmt, parse_tools, wants_logprobs, i) for i in range(len(handles))
        ]
        for out in outs[1:]:  # one reply: one id
            out.id, out.created = outs[0].id, outs[0].created
        if parsed.stream:
            chunks = stream_many(handles, outs, parsed.include_usage, _chunks, parsed.prompts)

            async def body_iter() -> AsyncIterator[str]:
                try:
                    async for piece in chunks:
                        yield piece
                finally:
                    await chunks.aclose()
                    pool.release(name)

            return StreamingResponse(body_iter(), media_type="text/event-stream")
        try:
            fins = list(await asyncio.gather(*(finish_or_abort(h, request) for h in handles)))
        finally:
            pool.release(name)
        for fin in fins:
            if (
                fin.reason == "error" and fin.refused
            ):  # the input was wrong: the template refused it
                return _error(400, fin.error, "messages" if chat else "prompt")
            if fin.reason == "error":
                return _error(500, fin.error or "generation failed")
        return JSONResponse(merged_whole(outs, fins, parsed.prompts))

    return endpoint


def _default_embedder(name: str) -> Embedder:
    from ember.app.loading import load_embedding_model
    from ember.app.options import engine_options

    return load_embedding_model(engine_options(name))


def _guard_middleware(app: Any, guard: Guard) -> Any:
    from ember.app.server.anthropic.errors import error_response as anthropic_error
    from ember.app.server.anthropic.errors import is_anthropic_path

    async def middleware(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = {
                k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]
            }
            refusal = guard.check(headers, scope["path"])
            if refusal is not None:
                shape = anthropic_error if is_anthropic_path(scope["path"]) else _error
                await shape(refusal[0], refusal[1])(scope, receive, send)
                return
        await app(scope, receive, send)

    return middleware


def create_app(
    pool: ModelPool,
    guard: Guard,
    embedders: EmbedderPool | None = None,
    metrics: ServerMetrics | None = None,
) -> Starlette:
    """The ASGI app: routes plus the Host/Origin/key/size guard in front of them; embedders
    serves /v1/embeddings and /api/embed (default: each served model loaded on llama.cpp with
    the engine's default options); metrics: what GET /metrics shows (None: off, a 501)."""
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    def card(name: str) -> dict[str, Any]:
        return {"id": name, "object": "model", "created": 0, "owned_by": "ember"}

    async def models(request: Request) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [card(n) for n in pool.names()]})

    async def model(request: Request) -> Response:
        name = request.path_params["name"]
        if not pool.serves(name):
            return _error(404, pool.unknown_model_message(name), "model")
        return JSONResponse(card(name))

    async def health(request: Request) -> JSONResponse:
        # 503 when a loaded engine is dead or wedged, so a supervisor restarts the server
        states = pool.health()
        sick = {n: {"status": h.status, "detail": h.detail} for n, h in states.items() if not h.ok}
        body: dict[str, Any] = {"status": "unhealthy" if sick else "ok", "loaded": list(states)}
        if sick:
            body["unhealthy"] = sick
        return JSONResponse(body, status_code=503 if sick else 200)

    from ember.app.server import embeddings, ollama, ollama_models
    from ember.app.server.anthropic import routes as anthropic
    from ember.app.server.embedder_pool import EmbedderPool
    from ember.app.server.llamaserver import routes as llamaserver
    from ember.app.server.responses import routes as responses

    if embedders is None:
        embedders = EmbedderPool(_default_embedder, pool, max_loaded=pool.max_loaded)

    async def unload(request: Request) -> Response:
        """POST /ember/unload {"model": name}: unload an idle model now (ember stop)."""
        try:
            body = await read_json(request, guard.max_body_bytes)
        except RequestInvalid as exc:
            return _error(exc.status, str(exc), exc.param)
        name = body.get("model") if isinstance(body, dict) else None
        chat = isinstance(name, str) and name in pool.loaded()
        embed = isinstance(name, str) and name in embedders.loaded()
        if not isinstance(name, str) or not (chat or embed):
            return _error(404, f"model {str(name)[:80]!r} is not loaded", "model")
        if (chat and not pool.unload(name)) or (embed and not embedders.unload(name)):
            return _error(409, f"model {name!r} is serving a request; try again", "model")
        return JSONResponse({"unloaded": name})

    routes = [
        *ollama.routes(pool, guard, embedders),
        *ollama_models.routes(pool, guard),
        *embeddings.routes(embedders, guard),
        *anthropic.routes(pool, guard),
        *responses.routes(pool, guard),
        *llamaserver.routes(pool, guard, metrics),
        Route("/ember/unload", unload, methods=["POST"]),
        Route("/health", health, methods=["GET"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/v1/models/{name:path}", model, methods=["GET"]),
        Route("/v1/chat/completions", _make_endpoint(pool, guard, chat=True), methods=["POST"]),
        Route("/v1/completions", _make_endpoint(pool, guard, chat=False), methods=["POST"]),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        pool.close()
        embedders.close()

    from ember.app.server.cors import CorsMiddleware

    guards = [Middleware(CorsMiddleware, guard=guard), Middleware(_GuardWrapper, guard=guard)]
    return Starlette(routes=routes, lifespan=lifespan, middleware=guards)


class _GuardWrapper:
    """Starlette middleware adapter for the guard (runs before routing, before the body is read)."""

    def __init__(self, app: Any, guard: Guard) -> None:
        self._inner = _guard_middleware(app, guard)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        await self._inner(scope, receive, send)


__all__ = ["Backend", "Guard", "ModelPool", "create_app"]
