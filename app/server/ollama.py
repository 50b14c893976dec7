"""The Ollama API on the same server and engine: /api/version, tags, show, ps, chat, generate.

`ember serve --port 11434` is a drop-in for tools that speak Ollama. Streaming is NDJSON (one
JSON object a line, Ollama's default); request bodies are read in ollama_requests.py (options,
format, tools, keep_alive; a 400 naming any other field). `tools` and tool turns go through the
same tool-call layer as the OpenAI route; `keep_alive` 0 unloads the model after the request, a
duration keeps it that long after.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ember.app.reply_splitter import ReplySplitter
from ember.app.server.errors import RequestInvalid
from ember.app.server.io import finish_and_release, next_event, plain_error, read_json
from ember.app.server.logprobs import LogprobShaper
from ember.app.server.ollama_context import check_context, context_of
from ember.app.server.ollama_requests import parse_chat, parse_generate
from ember.app.server.ollama_truncate import truncate_to_fit
from ember.engine.api import Finished, TextDelta, TokenLogprob
from ember.errors import EmberError

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from ember.app.server.embedder_pool import EmbedderPool
    from ember.app.server.pool import ModelPool
    from ember.app.server.security import Guard

VERSION = "0.9.0"  # the Ollama API level these routes follow


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def _final(fin: Finished, started: float, load_ns: int = 0) -> dict[str, Any]:
    stats = fin.stats
    total_ns = int((time.perf_counter() - started) * 1e9)
    # decode_tok_s counts the intervals after the first token (whose time is in ttft_s)
    decode_s = (stats.generated_tokens - 1) / stats.decode_tok_s if stats.decode_tok_s else 0.0
    decode_ns = int(max(decode_s, 0.0) * 1e9)
    return {
        "done": True,
        "done_reason": "length" if fin.reason in ("length", "loop") else "stop",  # loop: cut short
        "total_duration": total_ns,
        "load_duration": load_ns,  # the model's load when this request loaded it
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
        self.load_ns = 0  # how long acquiring the model took (its load, if this request loaded it)

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
        elif fin.prompt_ids:  # the ids a later request continues from (ollama_context.py)
            body["context"] = context_of(fin)
        if self.logprobs is not None and self.logprobs.pending:
            body["logprobs"] = self.logprobs.take_entries()
        return head | body | _final(fin, started, self.load_ns)

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
        import anyio

        started = time.perf_counter()
        try:
            body = await read_json(request, guard.max_body_bytes)
            parse = parse_chat if chat else parse_generate
            model, stream, keep, gen = parse(body, pool.max_tokens_cap)
            before_load = time.perf_counter()
            name, backend = await pool.acquire(model)
            load_ns = int((time.perf_counter() - before_load) * 1e9)
        except RequestInvalid as exc:
            return error(exc)
        except EmberError as exc:
            return plain_error(503, str(exc))
        if gen is None:  # load / unload only
            pool.release(name, keep_alive_s=keep)
            done = {"model": name, "created_at": _now(), "response": "", "done": True}
            return JSONResponse(done | {"done_reason": "unload" if keep == 0 else "load"})
        try:  # past the context: cut as Ollama does, and log it (ollama_truncate.py)
            await anyio.to_thread.run_sync(check_context, backend, gen)
            gen = await anyio.to_thread.run_sync(truncate_to_fit, backend, gen)
            handle = backend.submit(gen)
        except RequestInvalid as exc:
            pool.release(name, keep_alive_s=keep)
            return error(exc)
        except EmberError as exc:
            pool.release(name, keep_alive_s=keep)
            return plain_error(400, str(exc))
        wants = gen.sampling.logprobs
        reply = _Reply(name, chat, backend.info.tool_format, bool(gen.offered_tools), wants)
        reply.load_ns = load_ns

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
        fin = await finish_and_release(
            handle, request, lambda: pool.release(name, keep_alive_s=keep)
        )
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
