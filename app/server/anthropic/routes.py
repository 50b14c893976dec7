"""POST /v1/messages and POST /v1/messages/count_tokens.

A model this server does not serve is a 404 in Anthropic's shape that lists the served models
and says how to map a name (`ember serve --alias 'claude-*=MODEL'`)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ember.app.server.anthropic.errors import error_response
from ember.app.server.anthropic.reply import MessageReply
from ember.app.server.anthropic.request import MessagesRequest, parse_messages
from ember.app.server.anthropic.signing import ThinkingSigner
from ember.app.server.anthropic.stream import message_events
from ember.app.server.context_fit import anthropic_message, overflow
from ember.app.server.errors import RequestInvalid
from ember.app.server.io import finish_and_release, read_json, sse_response
from ember.engine.api import Backend
from ember.errors import EmberError

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from ember.app.server.pool import ModelPool
    from ember.app.server.security import Guard


def _unknown_model(pool: ModelPool, exc: RequestInvalid) -> Response:
    served = ", ".join(pool.names()[:20]) or "none"
    message = (
        f"{exc.reason}; served models: {served}; to answer another name, start the server "
        "with --alias 'PATTERN=MODEL' (e.g. --alias 'claude-*=gemma3-270m')"
    )
    return error_response(404, message)


async def _accepted(
    request: Request, pool: ModelPool, guard: Guard, signer: ThinkingSigner, count_only: bool
) -> tuple[MessagesRequest, str, Backend] | Response:
    """The checked request and its model's backend (acquired: release it), or the error."""
    try:
        body = await read_json(request, guard.max_body_bytes)
        parsed = parse_messages(body, pool.max_tokens_cap, signer, count_only)
        name = pool.resolve(parsed.model)
    except RequestInvalid as exc:
        if exc.status == 404 and exc.param == "model":
            return _unknown_model(pool, exc)
        return error_response(exc.status, str(exc))
    if parsed.image_param:  # no model Ember runs reads images
        return error_response(
            400, f"{parsed.image_param}: model {name!r} takes text only; image input is not served"
        )
    try:
        name, backend = await pool.acquire(name)
    except RequestInvalid as exc:
        return error_response(exc.status, str(exc))
    except EmberError as exc:  # the model exists but failed to load
        return error_response(503, f"model: {exc}")
    switch = bool(backend.info.features.get("thinking_switch"))
    return replace(parsed, request=parsed.for_model(switch)), name, backend


def routes(pool: ModelPool, guard: Guard, signer: ThinkingSigner | None = None) -> list[Route]:
    """The routes; signer: signs and checks thinking blocks (default: this home's key,
    `thinking.key` in Ember's data folder, read or made on first use)."""
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from ember.paths import get_paths

    if signer is None:
        signer = ThinkingSigner(get_paths().data_dir / "thinking.key")

    async def messages(request: Request) -> Response:
        accepted = await _accepted(request, pool, guard, signer, count_only=False)
        if not isinstance(accepted, tuple):
            return accepted
        parsed, name, backend = accepted
        try:
            if (exceeded := await overflow(backend, parsed.request, False)) is not None:
                pool.release(name)  # context_fit.py: the prompt must leave room for a reply
                return error_response(400, anthropic_message(exceeded))
            handle = backend.submit(parsed.request)
        except EmberError as exc:
            pool.release(name)
            return error_response(400, str(exc))
        tools = bool(parsed.request.offered_tools)
        reply = MessageReply(name, backend.info.tool_format, tools, parsed.single_call, signer)
        if parsed.stream:
            return sse_response(message_events(handle, reply), lambda: pool.release(name))
        fin = await finish_and_release(handle, request, lambda: pool.release(name))
        if fin.reason == "error":
            return error_response(400 if fin.refused else 500, fin.error or "generation failed")
        return JSONResponse(reply.whole(fin))

    async def count_tokens(request: Request) -> Response:
        accepted = await _accepted(request, pool, guard, signer, count_only=True)
        if not isinstance(accepted, tuple):
            return accepted
        parsed, name, backend = accepted
        try:
            import anyio

            count = await anyio.to_thread.run_sync(backend.count_tokens, parsed.request)
        except EmberError as exc:  # the chat template refused the conversation
            return error_response(400, f"messages: {exc}")
        finally:
            pool.release(name)
        return JSONResponse({"input_tokens": count})

    return [
        Route("/v1/messages", messages, methods=["POST"]),
        Route("/v1/messages/count_tokens", count_tokens, methods=["POST"]),
    ]
