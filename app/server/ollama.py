"""The Ollama API on the same server and engine: /api/version, tags, show, ps, chat, generate.

`ember serve --port 11434` is a drop-in for tools that speak Ollama. Streaming is NDJSON (one
JSON object a line, Ollama's default); `options` map onto SamplingParams (num_predict,
temperature, top_k, top_p, min_p, repeat_penalty, repeat_last_n, presence/frequency_penalty,
seed, stop; num_ctx up to the server's --ctx); `format` "json" or a JSON schema is a
constraint; `tools` and tool turns go through the same tool-call layer as the OpenAI route;
`keep_alive` 0 unloads the model after the request, a duration keeps it that long after.
Anything else is a 400 naming the field (Ollama's status for bad requests).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ember.app.server import chat_fields, logprob_fields
from ember.app.server.errors import RequestInvalid
from ember.app.server.io import next_event, plain_error, read_json
from ember.app.server.logprobs import LogprobShaper
from ember.app.server.reply_splitter import ReplySplitter
from ember.engine.api import (
    ChatMessage,
    ConstraintSpec,
    Finished,
    GenerationRequest,
    SamplingParams,
    TextDelta,
    TokenLogprob,
)
from ember.engine.errors import EngineError
from ember.errors import EmberError
from ember.models.text.tool_calls import ToolCall

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from ember.app.server.embedder_pool import EmbedderPool
    from ember.app.server.pool import ModelPool
    from ember.app.server.security import Guard

VERSION = "0.9.0"  # the Ollama API level these routes follow
OPTIONS = {
    "num_predict": ("max_tokens", int),
    "temperature": ("temperature", float),
    "top_k": ("top_k", int),
    "top_p": ("top_p", float),
    "min_p": ("min_p", float),
    "repeat_penalty": ("repeat_penalty", float),
    "repeat_last_n": ("penalty_last_n", int),
    "presence_penalty": ("presence_penalty", float),
    "frequency_penalty": ("frequency_penalty", float),
    "seed": ("seed", int),
}
CHAT_FIELDS = {"model", "messages", "stream", "format", "options", "tools", "keep_alive", "think"}
GENERATE_FIELDS = {"model", "prompt", "system", "raw", "stream", "format", "options", "keep_alive"}
CHAT_FIELDS |= {"logprobs", "top_logprobs"}  # app/server/logprob_fields.py
GENERATE_FIELDS |= {"logprobs", "top_logprobs"}


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def _refuse_unknown(body: dict[str, Any], known: set[str]) -> None:
    for key in body:
        if key not in known:
            raise RequestInvalid(str(key)[:64], "is not supported by this server", status=400)


def sampling(options: Any, cap: int, body: dict[str, Any] | None = None) -> SamplingParams:
    """Ollama's options (and body's logprobs fields) as SamplingParams (400 naming an unknown or
    out-of-range option)."""
    if options is None:
        options = {}
    if not isinstance(options, dict):
        raise RequestInvalid("options", "must be an object", status=400)
    fields: dict[str, Any] = {"max_tokens": min(256, cap)}
    if body is not None:
        fields["logprobs"], fields["top_logprobs"] = logprob_fields.parse(body, True, 400)
    for key, value in options.items():
        if key == "stop":
            if not isinstance(value, list) or not all(isinstance(s, str) and s for s in value):
                raise RequestInvalid("options.stop", "must be a list of strings", status=400)
            fields["stop"] = tuple(value[:16])
        elif key == "num_ctx":
            if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= cap:
                raise RequestInvalid("options.num_ctx", f"must be 1..{cap} (--ctx)", status=400)
        elif key in OPTIONS:
            name, kind = OPTIONS[key]
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise RequestInvalid(f"options.{key}", "must be a number", status=400)
            if kind is int and not float(value).is_integer():
                raise RequestInvalid(f"options.{key}", "must be an integer", status=400)
            fields[name] = kind(value)
        else:
            raise RequestInvalid(f"options.{key}", "is not supported by this server", status=400)
    if fields["max_tokens"] in (-1, -2):  # Ollama: unlimited / fill the context
        fields["max_tokens"] = cap
    if not 1 <= fields["max_tokens"] <= cap:
        raise RequestInvalid("options.num_predict", f"must be 1..{cap} or -1", status=400)
    try:
        return SamplingParams(**fields)
    except EngineError as exc:
        raise RequestInvalid("options", str(exc), status=400) from None


def constraint(value: Any) -> ConstraintSpec | None:
    """`format`: "json" (any JSON object) or a JSON schema."""
    if value in (None, ""):
        return None
    if value == "json":
        return ConstraintSpec("json_object")
    if isinstance(value, dict):
        return ConstraintSpec("json_schema", json.dumps(value))
    raise RequestInvalid("format", 'must be "json" or a JSON schema object', status=400)


def keep_alive_s(value: Any) -> float | None:
    """keep_alive as seconds: a number, or "5m" / "30s" / "1h"; None when absent; < 0 forever."""
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str) and value:
        units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
        for unit in ("ms", "s", "m", "h"):
            if value.endswith(unit) and value[: -len(unit)].lstrip("-").replace(".", "").isdigit():
                return float(value[: -len(unit)]) * units[unit]
        if value.lstrip("-").isdigit():
            return float(value)
    raise RequestInvalid("keep_alive", 'must be seconds or a duration like "5m"', status=400)


def _messages(raw: Any) -> tuple[ChatMessage, ...]:
    if not isinstance(raw, list):
        raise RequestInvalid("messages", "must be a list", status=400)
    out = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            raise RequestInvalid(f"messages[{i}]", "must be an object", status=400)
        if item.get("images"):
            raise RequestInvalid(f"messages[{i}].images", "images are not supported", status=400)
        role, content = item.get("role"), item.get("content") or ""
        if role not in ("system", "user", "assistant", "tool") or not isinstance(content, str):
            raise RequestInvalid(f"messages[{i}]", "needs a role and text content", status=400)
        calls = []
        for j, call in enumerate(item.get("tool_calls") or []):
            fn = call.get("function") if isinstance(call, dict) else None
            if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
                raise RequestInvalid(
                    f"messages[{i}].tool_calls[{j}]", "needs a function", status=400
                )
            args = fn.get("arguments", {})
            calls.append(ToolCall(fn["name"], args if isinstance(args, str) else json.dumps(args)))
        name = item.get("tool_name") or item.get("name") or ""
        out.append(ChatMessage(role, content, tool_calls=tuple(calls), name=str(name)))
    return tuple(out)


def parse_chat(body: Any, cap: int) -> tuple[str | None, bool, float | None, GenerationRequest]:
    if not isinstance(body, dict):
        raise RequestInvalid("body", "must be a JSON object", status=400)
    _refuse_unknown(body, CHAT_FIELDS)
    tools, _ = chat_fields.parse_tools({"tools": body.get("tools")})
    kwargs = {} if body.get("think") is None else {"enable_thinking": bool(body["think"])}
    request = _request(
        messages=_messages(body.get("messages")),
        sampling=sampling(body.get("options"), cap, body),
        constraint=constraint(body.get("format")),
        tools=tools,
        template_kwargs=kwargs,
    )
    return _model(body), _stream(body), keep_alive_s(body.get("keep_alive")), request


def parse_generate(
    body: Any, cap: int
) -> tuple[str | None, bool, float | None, GenerationRequest | None]:
    if not isinstance(body, dict):
        raise RequestInvalid("body", "must be a JSON object", status=400)
    _refuse_unknown(body, GENERATE_FIELDS)
    prompt, system = body.get("prompt") or "", body.get("system") or ""
    if not isinstance(prompt, str) or not isinstance(system, str):
        raise RequestInvalid("prompt", "must be a string", status=400)
    keep = keep_alive_s(body.get("keep_alive"))
    if not prompt:  # Ollama: an empty prompt only loads (or, with keep_alive 0, unloads)
        return _model(body), False, keep, None
    options = sampling(body.get("options"), cap, body)
    spec = constraint(body.get("format"))
    if body.get("raw"):
        request = _request(
            prompt=f"{system}\n\n{prompt}" if system else prompt, sampling=options, constraint=spec
        )
    else:
        turns = ((ChatMessage("system", system),) if system else ()) + (
            ChatMessage("user", prompt),
        )
        request = _request(messages=turns, sampling=options, constraint=spec)
    return _model(body), _stream(body), keep, request


def _request(**fields: Any) -> GenerationRequest:
    try:
        return GenerationRequest(**fields)
    except EngineError as exc:
        raise RequestInvalid("messages", str(exc), status=400) from None


def _model(body: dict[str, Any]) -> str | None:
    model = body.get("model")
    if model is not None and (not isinstance(model, str) or not 0 < len(model) <= 512):
        raise RequestInvalid("model", "must be a non-empty string", status=400)
    return model


def _stream(body: dict[str, Any]) -> bool:
    value = body.get("stream", True)
    if not isinstance(value, bool):
        raise RequestInvalid("stream", "must be a boolean", status=400)
    return value


def _final(fin: Finished, started: float) -> dict[str, Any]:
    stats = fin.stats
    total_ns = int((time.perf_counter() - started) * 1e9)
    decode_ns = int(stats.generated_tokens / stats.decode_tok_s * 1e9) if stats.decode_tok_s else 0
    return {
        "done": True,
        "done_reason": "length" if fin.reason in ("length", "loop") else "stop",  # loop: cut short
        "total_duration": total_ns,
        "load_duration": 0,
        "prompt_eval_count": stats.prompt_tokens,
        "prompt_eval_duration": int(stats.ttft_s * 1e9),
        "eval_count": stats.generated_tokens,
        "eval_duration": decode_ns,
    }


class _Reply:
    """One request's NDJSON lines in the /api/chat or /api/generate shape."""

    def __init__(
        self, model: str, chat: bool, fmt_name: str, tools: bool, logprobs: bool = False
    ) -> None:
        self.model, self.chat = model, chat
        self.splitter = ReplySplitter(fmt_name, tools) if chat else None
        self.logprobs = LogprobShaper(chat=True) if logprobs else None

    def lines(
        self, text: str, final: bool = False, logprobs: tuple[TokenLogprob, ...] = ()
    ) -> list[dict[str, Any]]:
        """The lines a delta releases; the first carries the logprobs of the tokens it completes
        (pending ones wait for the next line)."""
        out = self._lines(text, final)
        if self.logprobs is not None:
            self.logprobs.add(logprobs)
            if out and self.logprobs.pending:
                out[0]["logprobs"] = self.logprobs.take_entries()
        return out

    def _lines(self, text: str, final: bool) -> list[dict[str, Any]]:
        head = {"model": self.model, "created_at": _now()}
        if self.splitter is None:
            return [head | {"response": text, "done": False}] if text else []
        reasoning, content, calls = self.splitter.feed(text, final)
        if not (reasoning or content or calls):
            return []
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if reasoning:
            message["thinking"] = reasoning
        if calls:
            message["tool_calls"] = [
                {"function": {"name": c.name, "arguments": c.arguments_dict}} for c in calls
            ]
        return [head | {"message": message, "done": False}]

    def last(self, fin: Finished, started: float) -> dict[str, Any]:
        head = {"model": self.model, "created_at": _now()}
        body: dict[str, Any] = {"response": ""}
        if self.chat:
            body = {"message": {"role": "assistant", "content": ""}}
        if self.logprobs is not None and self.logprobs.pending:
            body["logprobs"] = self.logprobs.take_entries()
        return head | body | _final(fin, started)

    def whole(self, fin: Finished, started: float) -> dict[str, Any]:
        parts = self._lines(fin.text, final=True)
        merged = self.last(fin, started)
        if self.logprobs is not None:
            self.logprobs.add(fin.logprobs)
            merged["logprobs"] = self.logprobs.take_entries()
        if self.chat:
            message: dict[str, Any] = {"role": "assistant", "content": ""}
            for part in parts:
                msg = part["message"]
                message["content"] += msg.get("content", "")
                if msg.get("thinking"):
                    message["thinking"] = message.get("thinking", "") + msg["thinking"]
                if msg.get("tool_calls"):
                    message.setdefault("tool_calls", []).extend(msg["tool_calls"])
            merged["message"] = message
        else:
            merged["response"] = "".join(p["response"] for p in parts)
        return merged


def routes(pool: ModelPool, guard: Guard, embedders: EmbedderPool | None = None) -> list[Route]:
    """The /api/* routes (embedders: also listed by /api/ps)."""
    from starlette.responses import JSONResponse, StreamingResponse
    from starlette.routing import Route

    def error(exc: RequestInvalid) -> Response:
        return plain_error(exc.status, str(exc))

    async def version(request: Request) -> Response:
        return JSONResponse({"version": VERSION})

    async def tags(request: Request) -> Response:
        return JSONResponse({"models": [pool.describe(n) for n in pool.names()]})

    async def ps(request: Request) -> Response:
        cards = [pool.describe(n, loaded=True) for n in pool.loaded()]
        if embedders is not None:
            for name in embedders.loaded():
                if name not in pool.loaded():  # loaded for embeddings only
                    expires = {"expires_at": embedders.expires_at(name), "size_vram": 0}
                    cards.append(pool.describe(name) | expires)
        return JSONResponse({"models": cards})

    async def show(request: Request) -> Response:
        import anyio

        from ember.app.server.model_facts import model_facts, show_body

        try:
            body = await read_json(request, guard.max_body_bytes)
            name = body.get("model") or body.get("name") if isinstance(body, dict) else None
            if not isinstance(name, str) or not pool.serves(name):
                raise RequestInvalid("model", pool.unknown_model_message(str(name)), status=404)
            if body.get("verbose"):
                raise RequestInvalid("verbose", "long metadata arrays are not shown", status=400)
        except RequestInvalid as exc:
            return error(exc)
        card = pool.describe(name)
        facts = await anyio.to_thread.run_sync(model_facts, name)
        return JSONResponse(show_body(name, card, facts))

    async def generate(request: Request, chat: bool) -> Response:
        started = time.perf_counter()
        try:
            body = await read_json(request, guard.max_body_bytes)
            parse = parse_chat if chat else parse_generate
            model, stream, keep, gen = parse(body, pool.max_tokens_cap)
            name, backend = await pool.acquire(model)
        except RequestInvalid as exc:
            return error(exc)
        except EmberError as exc:
            return plain_error(503, str(exc))
        if gen is None:  # load / unload only
            pool.release(name, keep_alive_s=keep)
            done = {"model": name, "created_at": _now(), "response": "", "done": True}
            return JSONResponse(done | {"done_reason": "unload" if keep == 0 else "load"})
        try:
            handle = backend.submit(gen)
        except EmberError as exc:
            pool.release(name, keep_alive_s=keep)
            return plain_error(400, str(exc))
        wants = gen.sampling.logprobs
        reply = _Reply(name, chat, backend.info.tool_format, bool(gen.offered_tools), wants)

        async def lines() -> AsyncIterator[str]:
            iterator = iter(handle)
            finished = False
            try:
                while (event := await next_event(iterator)) is not None:
                    if isinstance(event, TextDelta) and (event.text or event.logprobs):
                        for line in reply.lines(event.text, logprobs=event.logprobs):
                            yield json.dumps(line) + "\n"
                    elif isinstance(event, Finished):
                        finished = True
                        if event.reason == "error":
                            yield json.dumps({"error": event.error}) + "\n"
                            return
                        for line in reply.lines("", final=True):
                            yield json.dumps(line) + "\n"
                        yield json.dumps(reply.last(event, started)) + "\n"
            finally:
                if not finished:
                    handle.abort()
                pool.release(name, keep_alive_s=keep)

        if stream:
            return StreamingResponse(lines(), media_type="application/x-ndjson")
        try:
            fin = await _result(handle)
        finally:
            pool.release(name, keep_alive_s=keep)
        if fin.reason == "error":
            return plain_error(400 if fin.refused else 500, fin.error)
        return JSONResponse(reply.whole(fin, started))

    async def chat(request: Request) -> Response:
        return await generate(request, chat=True)

    async def completion(request: Request) -> Response:
        return await generate(request, chat=False)

    return [
        Route("/api/version", version, methods=["GET"]),
        Route("/api/tags", tags, methods=["GET"]),
        Route("/api/ps", ps, methods=["GET"]),
        Route("/api/show", show, methods=["POST"]),
        Route("/api/chat", chat, methods=["POST"]),
        Route("/api/generate", completion, methods=["POST"]),
    ]


async def _result(handle: Any) -> Finished:
    iterator = iter(handle)
    while (event := await next_event(iterator)) is not None:
        if isinstance(event, Finished):
            return event
    return handle.result()
