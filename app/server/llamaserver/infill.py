"""POST /infill: llama-server's fill-in-the-middle for code models, on the engine's FIM path.

{input_prefix, input_suffix, prompt, input_extra: [], n_predict, stream, + the sampling fields of
/v1/completions} -> {content, model, stop, stop_type, tokens_predicted, tokens_evaluated,
tokens_cached}; streamed as `data: {content, stop: false}` events and a last one with stop true.
`prompt` (text already typed at the cursor) joins the prefix. A model whose vocabulary has no FIM
tokens gets a 400 that says so; repository context (non-empty input_extra) is refused.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ember.app.server.errors import RequestInvalid
from ember.app.server.io import error_response, finish_or_abort, next_event, read_json
from ember.app.server.schema import MAX_PROMPT_CHARS, ParsedRequest, parse_completion
from ember.engine.api import Finished, RequestHandle, TextDelta
from ember.errors import EmberError

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from ember.app.server.pool import ModelPool
    from ember.app.server.security import Guard

FIM_FIELDS = ("input_prefix", "input_suffix", "prompt", "input_extra")


def parse_infill(body: Any, max_tokens_cap: int) -> ParsedRequest:
    """The FIM fields, and the rest read as a /v1/completions body (sampling, model, stream)."""
    if not isinstance(body, dict):
        raise RequestInvalid("body", "must be a JSON object", status=400)
    texts = {}
    for key in ("input_prefix", "input_suffix", "prompt"):
        value = body.get(key, "")
        if not isinstance(value, str) or len(value) > MAX_PROMPT_CHARS:
            raise RequestInvalid(
                key, f"must be a string of at most {MAX_PROMPT_CHARS} chars", status=400
            )
        texts[key] = value
    if body.get("input_extra") not in (None, []):
        raise RequestInvalid(
            "input_extra", "repository context is not supported: send []", status=400
        )
    rest = {k: v for k, v in body.items() if k not in FIM_FIELDS}
    if rest.pop("cache_prompt", True) is not True:  # Ember always reuses a cached prefix
        raise RequestInvalid("cache_prompt", "prefix caching is always on: send true", status=400)
    if "n_predict" in rest:
        rest["max_tokens"] = rest.pop("n_predict")
    prefix = texts["input_prefix"] + texts["prompt"]
    try:  # the completions parser wants a prompt; the FIM request replaces it below
        parsed = parse_completion({**rest, "prompt": prefix or " "}, max_tokens_cap)
    except RequestInvalid as exc:
        param = "n_predict" if exc.param == "max_tokens" and "n_predict" in body else exc.param
        raise RequestInvalid(param, exc.reason, status=exc.status) from None
    if parsed.more:
        raise RequestInvalid("n", "infill writes one completion", status=400)
    request = replace(parsed.request, prompt=prefix, suffix=texts["input_suffix"])
    return replace(parsed, request=request)


def _final(name: str, fin: Finished) -> dict[str, Any]:
    stats = fin.stats
    return {
        "model": name,
        "stop": True,
        "stop_type": "limit" if fin.reason in ("length", "loop") else "eos",
        "tokens_predicted": stats.generated_tokens,
        "tokens_evaluated": stats.prompt_tokens,
        "tokens_cached": stats.cached_tokens,
    }


async def _stream(handle: RequestHandle, name: str) -> AsyncIterator[str]:
    iterator = iter(handle)
    finished = False
    try:
        while (event := await next_event(iterator)) is not None:
            if isinstance(event, TextDelta) and event.text:
                yield f"data: {json.dumps({'content': event.text, 'stop': False})}\n\n"
            elif isinstance(event, Finished):
                finished = True
                last = {"content": ""} | _final(name, event)
                if event.reason == "error":
                    last["error"] = {"code": 400 if event.refused else 500, "message": event.error}
                yield f"data: {json.dumps(last)}\n\n"
    finally:
        if not finished:
            handle.abort()


def routes(pool: ModelPool, guard: Guard) -> list[Route]:
    from starlette.responses import JSONResponse, StreamingResponse
    from starlette.routing import Route

    async def infill(request: Request) -> Response:
        try:
            body = await read_json(request, guard.max_body_bytes)
            parsed = parse_infill(body, pool.max_tokens_cap)
            name, backend = await pool.acquire(parsed.model)
        except RequestInvalid as exc:
            return error_response(exc.status, str(exc), exc.param)
        except EmberError as exc:
            return error_response(503, str(exc), "model")
        try:
            handle = backend.submit(parsed.request)
        except EmberError as exc:
            pool.release(name)
            return error_response(400, str(exc), "input_suffix")
        if parsed.stream:

            async def body_iter() -> AsyncIterator[str]:
                try:
                    async for piece in _stream(handle, name):
                        yield piece
                finally:
                    pool.release(name)

            return StreamingResponse(body_iter(), media_type="text/event-stream")
        try:
            fin = await finish_or_abort(handle, request)  # io.py: aborts on disconnect
        finally:
            pool.release(name)
        if fin.reason == "error":  # refused: no FIM tokens in this model's vocabulary
            status = 400 if fin.refused else 500
            return error_response(status, fin.error, "model" if fin.refused else None)
        return JSONResponse({"content": fin.text} | _final(name, fin))

    return [Route("/infill", infill, methods=["POST"])]
