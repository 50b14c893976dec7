"""POST /v1/responses (whole or streamed as server-sent events), GET and DELETE
/v1/responses/{id} for stored responses."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

from ember.app.server.context_fit import openai_error, overflow
from ember.app.server.errors import RequestInvalid
from ember.app.server.io import (
    error_response,
    finish_and_release,
    next_event,
    read_json,
    sse_response,
)
from ember.app.server.responses.output import Event, ResponseBuilder
from ember.app.server.responses.request import ResponsesRequest, parse_responses
from ember.app.server.responses.store import ResponseStore, fits
from ember.engine.api import Finished, RequestHandle, TextDelta
from ember.errors import EmberError

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from ember.app.server.pool import ModelPool
    from ember.app.server.security import Guard


def _sse(event: Event) -> str:
    return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n"


async def _events(handle: RequestHandle, out: ResponseBuilder) -> AsyncGenerator[Event, None]:
    """The stream's events, the last one the response's end; aborts the request if the caller
    stops early (a client that went away)."""
    iterator = iter(handle)
    finished = False
    try:
        for event in out.start():
            yield event
        while (item := await next_event(iterator)) is not None:
            if isinstance(item, TextDelta) and item.text:
                for event in out.feed(item.text, len(item.token_ids)):
                    yield event
            elif isinstance(item, Finished):
                finished = True
                for event in out.finish(item):
                    yield event
    finally:
        if not finished:
            handle.abort()  # frees the KV blocks


def _load_earlier(body: Any, store: ResponseStore) -> list[dict[str, Any]] | None:
    previous = body.get("previous_response_id") if isinstance(body, dict) else None
    if not isinstance(previous, str):
        return None
    items = store.items(previous)
    if items is None:
        raise RequestInvalid(
            "previous_response_id", f"no stored response {previous[:80]!r}", status=404
        )
    return items


def routes(pool: ModelPool, guard: Guard, store: ResponseStore | None = None) -> list[Route]:
    """The routes; store: where responses are kept (default: responses.sqlite3 in Ember's data
    folder, opened on first use)."""
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from ember.paths import get_paths

    if store is None:
        store = ResponseStore(get_paths().data_dir / "responses.sqlite3")

    def keep(parsed: ResponsesRequest, out: ResponseBuilder) -> None:
        if parsed.store:
            store.save(out.body, parsed.items + out.body["output"])

    async def create(request: Request) -> Response:
        try:
            body = await read_json(request, guard.max_body_bytes)
            parsed = parse_responses(body, pool.max_tokens_cap, _load_earlier(body, store))
            if parsed.store and not fits(parsed.items):
                raise RequestInvalid(
                    "input", "the conversation is too long to store; send store: false", status=400
                )
            name, backend = await pool.acquire(parsed.model)
        except RequestInvalid as exc:
            return error_response(exc.status, str(exc), exc.param)
        except EmberError as exc:  # the model exists but failed to load
            return error_response(503, str(exc), "model")
        try:
            explicit = body.get("max_output_tokens") is not None
            if (exceeded := await overflow(backend, parsed.request, explicit)) is not None:
                pool.release(name)
                return openai_error(exceeded)
            handle = backend.submit(parsed.request)
        except EmberError as exc:
            pool.release(name)
            return error_response(400, str(exc), "input")
        extra = {"store": parsed.store, "previous_response_id": parsed.previous_response_id}
        tools = bool(parsed.request.offered_tools)
        out = ResponseBuilder(name, backend.info.tool_format, tools, parsed.echo, extra)
        if parsed.stream:

            async def pieces() -> AsyncGenerator[str, None]:
                async with aclosing(_events(handle, out)) as events:
                    async for event in events:
                        yield _sse(event)
                keep(parsed, out)  # only a stream that ran to its end is stored

            return sse_response(pieces(), lambda: pool.release(name))
        fin = await finish_and_release(handle, request, lambda: pool.release(name), out.feed_delta)
        if fin.reason == "abort":  # the client went away
            return error_response(499, "the client disconnected")
        out.finish(fin)
        if out.body["status"] == "failed" and out.body["error"]["code"] == "invalid_prompt":
            return error_response(400, out.body["error"]["message"], "input")
        if out.body["status"] == "failed":
            return error_response(500, out.body["error"]["message"])
        keep(parsed, out)
        return JSONResponse(out.body)

    def unknown(response_id: str) -> Response:
        return error_response(404, f"no stored response {response_id[:80]!r}", "response_id")

    async def get(request: Request) -> Response:
        response_id = request.path_params["response_id"]
        found = store.response(response_id)
        return unknown(response_id) if found is None else JSONResponse(found)

    async def delete(request: Request) -> Response:
        response_id = request.path_params["response_id"]
        if not store.delete(response_id):
            return unknown(response_id)
        return JSONResponse({"id": response_id, "object": "response", "deleted": True})

    return [
        Route("/v1/responses", create, methods=["POST"]),
        Route("/v1/responses/{response_id}", get, methods=["GET"]),
        Route("/v1/responses/{response_id}", delete, methods=["DELETE"]),
    ]
