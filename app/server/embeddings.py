"""Embedding routes: OpenAI's /v1/embeddings, Ollama's /api/embed and legacy /api/embeddings.

The named model is loaded for embeddings through the EmbedderPool (llama.cpp, pooling from the
model's GGUF metadata; a chat model is mean-pooled, as Ollama does) and the vectors computed in
a worker thread. A model or runner that cannot embed, an input over the model's context (unless
Ollama's `truncate`), a `dimensions` other than the model's: 4xx naming the field.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ember.app.server.embedding_schema import (
    EmbedRequest,
    encode_base64,
    parse_ollama,
    parse_openai,
)
from ember.app.server.errors import RequestInvalid
from ember.app.server.io import error_response, plain_error, read_json
from ember.engine.embedding import CannotEmbed, Embeddings, InputRejected
from ember.errors import EmberError

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from ember.app.server.embedder_pool import EmbedderPool
    from ember.app.server.security import Guard


async def _embed(
    pool: EmbedderPool, req: EmbedRequest, status: int
) -> tuple[str, Embeddings, float]:
    """(model name, vectors, seconds to get the model); RequestInvalid (status) for what the
    client got wrong."""
    import anyio

    started = time.perf_counter()
    try:
        name, embedder = await pool.acquire(req.model)
    except CannotEmbed as exc:
        raise RequestInvalid("model", str(exc), status=status) from None
    load_s = time.perf_counter() - started
    try:
        dims = embedder.info.dimensions
        if req.dimensions is not None and req.dimensions != dims:
            raise RequestInvalid(
                "dimensions",
                f"{name} gives {dims}-dimensional vectors; Ember does not shorten them",
                status=status,
            )

        def run() -> Embeddings:
            return embedder.embed(req.inputs, normalize=req.normalize, truncate=req.truncate)

        try:
            result = await anyio.to_thread.run_sync(run)
        except InputRejected as exc:  # an input's tokens: out of the vocabulary or too many
            raise RequestInvalid(f"input[{exc.index}]", exc.reason, status=status) from None
    finally:
        pool.release(name, keep_alive_s=req.keep_alive_s)
    return name, result, load_s


def _openai_body(name: str, req: EmbedRequest, result: Embeddings) -> dict[str, Any]:
    data = [
        {
            "object": "embedding",
            "index": i,
            "embedding": encode_base64(vec) if req.base64 else vec.tolist(),
        }
        for i, vec in enumerate(result.vectors)
    ]
    usage = {"prompt_tokens": result.prompt_tokens, "total_tokens": result.prompt_tokens}
    return {"object": "list", "data": data, "model": name, "usage": usage}


def routes(pool: EmbedderPool, guard: Guard) -> list[Route]:
    """The three embedding routes."""
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def openai(request: Request) -> Response:
        try:
            req = parse_openai(await read_json(request, guard.max_body_bytes))
            name, result, _load_s = await _embed(pool, req, 400)
        except RequestInvalid as exc:
            return error_response(exc.status, str(exc), exc.param)
        except EmberError as exc:  # the model exists but failed to load
            return error_response(503, str(exc), "model")
        return JSONResponse(_openai_body(name, req, result))

    async def ollama(request: Request, legacy: bool) -> Response:
        started = time.perf_counter()
        try:
            req = parse_ollama(await read_json(request, guard.max_body_bytes), legacy=legacy)
            name, result, load_s = await _embed(pool, req, 400)
        except RequestInvalid as exc:
            return plain_error(exc.status, str(exc))
        except EmberError as exc:
            return plain_error(503, str(exc))
        if legacy:
            return JSONResponse({"embedding": result.vectors[0].tolist()})
        return JSONResponse(
            {
                "model": name,
                "embeddings": result.vectors.tolist(),
                "total_duration": int((time.perf_counter() - started) * 1e9),
                "load_duration": int(load_s * 1e9),
                "prompt_eval_count": result.prompt_tokens,
            }
        )

    async def embed(request: Request) -> Response:
        return await ollama(request, legacy=False)

    async def embeddings(request: Request) -> Response:
        return await ollama(request, legacy=True)

    return [
        Route("/v1/embeddings", openai, methods=["POST"]),
        Route("/api/embed", embed, methods=["POST"]),
        Route("/api/embeddings", embeddings, methods=["POST"]),
    ]
