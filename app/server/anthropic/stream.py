"""A reply as Anthropic's event stream: message_start, ping, then per content block
content_block_start / content_block_delta (text_delta, thinking_delta, input_json_delta; a
thinking block's signature_delta last: signing.py) / content_block_stop, then message_delta (stop_reason, stop_sequence, the cumulative usage) and
message_stop. A `ping` goes out while nothing else has for PING_S (a long prefill).

Usage: message_start's counts are 0, as the prompt's size is known when the reply ends; the
message_delta carries the totals (input, output, cache reads), which the SDKs take as final.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncGenerator
from typing import Any

from ember.app.reply_splitter import CallEvent
from ember.app.server.anthropic.errors import error_body
from ember.app.server.anthropic.reply import MessageReply, usage
from ember.engine.api import Event, Finished, RequestHandle, TextDelta
from ember.models.text.tool_calls import ArgsDelta, CallStart

PING_S = 10.0


def sse(kind: str, data: dict[str, Any]) -> str:
    return f"event: {kind}\ndata: {json.dumps(data)}\n\n"


class BlockEvents:
    """Text deltas -> content block events, one block open at a time, in the reply's order."""

    def __init__(self, reply: MessageReply) -> None:
        self.reply = reply
        self.count = 0  # blocks started so far
        self.open: str | None = None  # the open block's kind: thinking, text or tool_use
        self.thinking = ""  # the open thinking block's text so far (signed when it closes)
        self.call_blocks: dict[int, int] = {}  # a streamed call's index -> its block index

    def _start(self, kind: str, block: dict[str, Any]) -> list[str]:
        out = self._close()
        self.open = kind
        out.append(sse("content_block_start", {"type": "content_block_start",
                                               "index": self.count, "content_block": block}))  # fmt: skip
        self.count += 1
        return out

    def _close(self) -> list[str]:
        if self.open is None:
            return []
        out = []
        if self.open == "thinking":
            signature = self.reply.signer.sign(self.thinking)
            out.append(self._delta("signature_delta", {"signature": signature}))
            self.thinking = ""
        self.open = None
        stop = {"type": "content_block_stop", "index": self.count - 1}
        return [*out, sse("content_block_stop", stop)]

    def _delta(self, kind: str, delta: dict[str, Any]) -> str:
        return sse("content_block_delta", {"type": "content_block_delta",
                                           "index": self.count - 1, "delta": delta | {"type": kind}})  # fmt: skip

    def _text(self, kind: str, text: str) -> list[str]:
        if not text:
            return []
        block = {"type": kind, kind: ""} | ({"signature": ""} if kind == "thinking" else {})
        out = self._start(kind, block) if self.open != kind else []
        if kind == "thinking":
            self.thinking += text
        return [*out, self._delta(f"{kind}_delta", {kind: text})]

    def _call(self, event: CallEvent) -> list[str]:
        if self.reply.single_call and getattr(event, "index", 0) > 0:
            return []  # disable_parallel_tool_use: calls after the first are not part of the reply
        if isinstance(event, CallStart):
            self.call_blocks[event.index] = self.count
            block = {"type": "tool_use", "id": event.id, "name": event.name, "input": {}}
            return self._start("tool_use", block)
        if isinstance(event, ArgsDelta):
            return [self._delta("input_json_delta", {"partial_json": event.text})]
        index = self.reply.splitter.calls.index(event)
        if self.reply.single_call and index > 0:
            return []
        if index in self.call_blocks:  # streamed: its arguments are out; the block ends
            return self._close()
        block = {"type": "tool_use", "id": event.id, "name": event.name, "input": {}}
        delta = self._delta("input_json_delta", {"partial_json": event.arguments})
        return [*self._start("tool_use", block), delta, *self._close()]

    def feed(self, text: str, final: bool = False) -> list[str]:
        reasoning, content, calls = self.reply.splitter.stream(text, final)
        out = self._text("thinking", reasoning) + self._text("text", content)
        for event in calls:
            out += self._call(event)
        return out + (self._close() if final else [])

    def finish(self, fin: Finished) -> list[str]:
        out = self.feed("", final=True)
        stop_reason, stop_sequence = self.reply.stop(fin)
        delta = {"stop_reason": stop_reason, "stop_sequence": stop_sequence}
        out.append(sse("message_delta", {"type": "message_delta", "delta": delta,
                                         "usage": usage(fin.stats)}))  # fmt: skip
        return [*out, sse("message_stop", {"type": "message_stop"})]


def _pump(handle: RequestHandle, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue) -> None:
    """The handle's events onto the event loop's queue (a thread: the handle blocks)."""
    for event in handle:
        try:
            loop.call_soon_threadsafe(queue.put_nowait, event)
        except RuntimeError:  # the server shut its event loop down: nobody is listening
            handle.abort()
            return


async def message_events(handle: RequestHandle, reply: MessageReply) -> AsyncGenerator[str, None]:
    """The whole event stream of one request; the request is aborted if the client leaves."""
    queue: asyncio.Queue[Event] = asyncio.Queue()
    loop = asyncio.get_running_loop()
    threading.Thread(target=_pump, args=(handle, loop, queue), daemon=True).start()
    blocks = BlockEvents(reply)
    finished = False
    start = reply.envelope([]) | {"usage": {"input_tokens": 0, "output_tokens": 0}}
    try:
        yield sse("message_start", {"type": "message_start", "message": start})
        yield sse("ping", {"type": "ping"})
        while not finished:
            try:
                event = await asyncio.wait_for(queue.get(), PING_S)
            except TimeoutError:
                yield sse("ping", {"type": "ping"})
                continue
            if isinstance(event, TextDelta):
                for piece in blocks.feed(event.text):
                    yield piece
            elif isinstance(event, Finished):
                finished = True
                if event.reason == "error":
                    status = 400 if event.refused else 500
                    yield sse("error", error_body(status, event.error or "generation failed"))
                    return
                for piece in blocks.finish(event):
                    yield piece
    finally:
        if not finished:
            handle.abort()  # the client went away: stop generating and free the KV blocks
