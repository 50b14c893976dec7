"""OpenAI's response shapes: chat completions (content, reasoning_content, tool_calls) and
plain completions, whole or as streamed chunks.

A chat reply goes through the think splitter (reasoning apart) and then the tool-call parser of
the model's format, both incremental, so a streamed reply gets the same split as a whole one:
content deltas as they become certain, each tool call announced once its name is known and its
arguments streamed as they are written (tool_call_deltas.py), and finish_reason "tool_calls"
when the reply made calls (the engine's reason when it ended inside a call's arguments).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from ember.app.reply_splitter import ReplySplitter
from ember.app.server.logprobs import LogprobShaper
from ember.app.server.tool_call_deltas import tool_call_deltas
from ember.engine.api import Finished

# OpenAI finish_reason of each engine reason. "loop" (the loop detector cut a reply that was
# repeating itself) is "length": the reply was cut short, the model did not end it (README).
FINISH = {"stop": "stop", "length": "length", "loop": "length", "abort": "stop", "error": "stop"}


def usage(fin: Finished) -> dict[str, int]:
    prompt, completion = fin.stats.prompt_tokens, fin.stats.generated_tokens
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


class Completion:
    """One request's response in the chat or the plain-completion shape."""

    def __init__(
        self,
        chat: bool,
        model: str,
        fmt_name: str = "generic",
        tools: bool = False,
        logprobs: bool = False,
        index: int = 0,
    ):
        self.chat = chat
        self.index = index  # the choice this reply is (n > 1, or one per prompt)
        self.logprobs = LogprobShaper(chat) if logprobs else None  # the request asked for them
        self.model = model
        self.id = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24]
        self.created = int(time.time())
        self.splitter = ReplySplitter(fmt_name, tools) if chat else None
        self.started_calls: set[str] = set()  # ids of the tool calls streamed so far

    def _envelope(self, chunk: bool) -> dict[str, Any]:
        kind = "chat.completion" if self.chat else "text_completion"
        return {
            "id": self.id,
            "object": kind + (".chunk" if chunk and self.chat else ""),
            "created": self.created,
            "model": self.model,
        }

    def finish_reason(self, fin: Finished) -> str:
        if self.splitter is not None and self.splitter.calls and not self.splitter.cut:
            return "tool_calls"
        return FINISH[fin.reason]

    def first_chunk(self) -> dict[str, Any]:
        body = self._envelope(chunk=True)
        if self.chat:
            body["choices"] = [
                {"index": self.index, "delta": {"role": "assistant"}, "finish_reason": None}
            ]
        else:
            body["choices"] = [{"index": self.index, "text": "", "finish_reason": None}]
        return body

    def delta_chunks(self, text: str, final: bool = False) -> list[dict[str, Any]]:
        """The chunks a text delta releases (none while it is held back)."""
        if self.splitter is None:
            return [self._text_chunk(text)] if text else []
        reasoning, content, events = self.splitter.stream(text, final)
        out = []
        delta: dict[str, Any] = {}
        if reasoning:
            delta["reasoning_content"] = reasoning
        if content:
            delta["content"] = content
        if delta:
            out.append(self._chat_chunk(delta))
        for entry in tool_call_deltas(events, self.splitter.calls, self.started_calls):
            out.append(self._chat_chunk({"tool_calls": [entry]}))
        return out

    def final_chunk(self, fin: Finished) -> dict[str, Any]:
        body = self._envelope(chunk=True)
        reason = self.finish_reason(fin)
        if self.chat:
            body["choices"] = [{"index": self.index, "delta": {}, "finish_reason": reason}]
        else:
            body["choices"] = [{"index": self.index, "text": "", "finish_reason": reason}]
        if self.logprobs is not None:  # tokens whose text went out with no chunk of its own
            self.logprobs.attach([body])
        return body

    def usage_chunk(self, fin: Finished) -> dict[str, Any]:
        return self._envelope(chunk=True) | {"choices": [], "usage": usage(fin)}

    def whole(self, fin: Finished) -> dict[str, Any]:
        body = self._envelope(chunk=False)
        if self.splitter is None:
            choice: dict[str, Any] = {"index": self.index, "text": fin.text}
        else:
            reasoning, content, _ = self.splitter.stream(fin.text, final=True)
            message: dict[str, Any] = {"role": "assistant", "content": content}
            if reasoning:
                message["reasoning_content"] = reasoning.strip()
            if self.splitter.calls:
                message["tool_calls"] = [c.to_openai() for c in self.splitter.calls]
                message["content"] = content.strip() or None
            choice = {"index": self.index, "message": message}
        choice["finish_reason"] = self.finish_reason(fin)
        choice["logprobs"] = self.logprobs.whole(fin.logprobs) if self.logprobs else None
        body["choices"] = [choice]
        body["usage"] = usage(fin)
        return body

    def _text_chunk(self, text: str) -> dict[str, Any]:
        body = self._envelope(chunk=True)
        body["choices"] = [{"index": self.index, "text": text, "finish_reason": None}]
        return body

    def _chat_chunk(self, delta: dict[str, Any]) -> dict[str, Any]:
        body = self._envelope(chunk=True)
        body["choices"] = [{"index": self.index, "delta": delta, "finish_reason": None}]
        return body
