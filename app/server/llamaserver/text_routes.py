"""POST /tokenize, /detokenize and /apply-template, as llama-server answers them.

/tokenize {content, add_special (BOS, default false), parse_special (special spellings become
control tokens, default true), with_pieces} -> {tokens: [id, ...]} or, with pieces,
{tokens: [{id, piece}, ...]} (a piece that is not whole UTF-8 is a list of byte values).
/detokenize {tokens} -> {content}. /apply-template {messages, tools, chat_template_kwargs...}
-> {prompt}: the text the model would read, rendered by the same template as a chat request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ember.app.server.errors import RequestInvalid
from ember.app.server.io import error_response, read_json
from ember.app.server.llamaserver.engine_access import on_engine
from ember.app.server.schema import MAX_PROMPT_CHARS, parse_chat
from ember.errors import EmberError

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from ember.app.server.pool import ModelPool
    from ember.app.server.security import Guard
    from ember.engine.engine import Engine

MAX_TOKENS = 1 << 20


def _object(body: Any, known: set[str]) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise RequestInvalid("body", "must be a JSON object", status=400)
    for key in body:
        if key not in known:
            raise RequestInvalid(str(key)[:64], "is not supported by this route", status=400)
    return body


def _flag(body: dict[str, Any], key: str, default: bool) -> bool:
    value = body.get(key, default)
    if not isinstance(value, bool):
        raise RequestInvalid(key, "must be a boolean", status=400)
    return value


def _piece(data: bytes) -> str | list[int]:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return list(data)


def tokenize_body(body: Any) -> tuple[Any, Any]:
    """(model, fn(engine) -> the reply) of a /tokenize body."""
    body = _object(body, {"model", "content", "add_special", "parse_special", "with_pieces"})
    content = body.get("content")
    if not isinstance(content, str) or len(content) > MAX_PROMPT_CHARS:
        raise RequestInvalid(
            "content", f"must be a string of at most {MAX_PROMPT_CHARS} chars", status=400
        )
    add_special = _flag(body, "add_special", False)
    parse_special = _flag(body, "parse_special", True)
    with_pieces = _flag(body, "with_pieces", False)

    def run(engine: Engine) -> dict[str, Any]:
        tok = engine.tokenizer
        ids = tok.encode(content, add_bos=add_special and tok.add_bos, parse_special=parse_special)
        if not with_pieces:
            return {"tokens": ids}
        return {"tokens": [{"id": i, "piece": _piece(tok.token_bytes(i))} for i in ids]}

    return body.get("model"), run


def detokenize_body(body: Any) -> tuple[Any, Any]:
    body = _object(body, {"model", "tokens"})
    tokens = body.get("tokens")
    if not isinstance(tokens, list) or len(tokens) > MAX_TOKENS:
        raise RequestInvalid(
            "tokens", f"must be a list of at most {MAX_TOKENS} token ids", status=400
        )
    for i, t in enumerate(tokens):
        if isinstance(t, bool) or not isinstance(t, int) or t < 0:
            raise RequestInvalid(f"tokens[{i}]", "must be a token id (an integer >= 0)", status=400)

    def run(engine: Engine) -> dict[str, Any]:
        vocab = engine.tokenizer.vocab_size
        for i, t in enumerate(tokens):
            if t >= vocab:
                raise RequestInvalid(
                    f"tokens[{i}]", f"{t} is outside the vocabulary ({vocab})", status=400
                )
        return {"content": engine.tokenizer.decode(tokens)}

    return body.get("model"), run


def template_body(body: Any, max_tokens_cap: int) -> tuple[Any, Any]:
    parsed = parse_chat(body, max_tokens_cap)

    def run(engine: Engine) -> dict[str, Any]:
        return {"prompt": engine.tokenizer.decode(engine.encode(parsed.request))}

    return parsed.model, run


def routes(pool: ModelPool, guard: Guard) -> list[Route]:
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    def endpoint(parse: Any) -> Any:
        async def handle(request: Request) -> Response:
            try:
                body = await read_json(request, guard.max_body_bytes)
                model, run = parse(body)
                _, reply = await on_engine(pool, model, run)
            except RequestInvalid as exc:
                return error_response(exc.status, str(exc), exc.param)
            except EmberError as exc:  # the template refused the messages
                return error_response(400, str(exc), "messages")
            return JSONResponse(reply)

        return handle

    return [
        Route("/tokenize", endpoint(tokenize_body), methods=["POST"]),
        Route("/detokenize", endpoint(detokenize_body), methods=["POST"]),
        Route(
            "/apply-template",
            endpoint(lambda body: template_body(body, pool.max_tokens_cap)),
            methods=["POST"],
        ),
    ]
