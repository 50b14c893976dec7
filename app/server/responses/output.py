"""A reply as a Responses object: output items (reasoning, message, function_call) built from
the reply splitter's reasoning, content and call events, with the stream events that build them.

One path for both shapes: a streamed reply feeds each text delta and sends the events; a whole
reply feeds its text once and keeps only the object. Events carry a sequence_number; an item
opens with response.output_item.added and closes with response.output_item.done, a message's
text in one output_text content part, a call's arguments as function_call_arguments deltas.
Content that is only whitespace (between a think block and a call) opens no message.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from ember.app.reply_splitter import ReplySplitter
from ember.engine.api import Finished, TextDelta
from ember.models.text.tool_calls import ArgsDelta, CallStart, ToolCall

Event = dict[str, Any]


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


class ResponseBuilder:
    """One request's response object and its stream events."""

    def __init__(
        self,
        model: str,
        fmt_name: str,
        tools: bool,
        echo: dict[str, Any],
        extra: dict[str, Any],
    ) -> None:
        self.splitter = ReplySplitter(fmt_name, tools)
        self.parallel = echo.get("parallel_tool_calls") is not False
        self.summary = bool((echo.get("reasoning") or {}).get("summary"))
        self.encrypted = "reasoning.encrypted_content" in echo.get("include", ())
        self.body: dict[str, Any] = {
            "id": new_id("resp"),
            "object": "response",
            "created_at": int(time.time()),
            "status": "in_progress",
            "error": None,
            "incomplete_details": None,
            "model": model,
            "output": [],
            "usage": None,
            "truncation": "disabled",
            **echo,
            **extra,  # store, previous_response_id
        }
        self.body["text"] = echo.get("text") or {"format": {"type": "text"}}
        self.body["reasoning"] = echo.get("reasoning") or {"effort": None, "summary": None}
        self.open: dict[str, Any] | None = None  # the item being written
        self.open_text = ""  # the open reasoning or message item's text so far
        self.held = ""  # whitespace content not yet in a message
        self.calls: dict[str, dict[str, Any]] = {}  # call id -> its item
        self.sequence = 0
        self.reasoning_tokens = 0

    @property
    def id(self) -> str:
        return str(self.body["id"])

    def _event(self, kind: str, **fields: Any) -> Event:
        event = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return event

    def _snapshot(self) -> dict[str, Any]:
        return {**self.body, "output": [dict(item) for item in self.body["output"]]}

    def start(self) -> list[Event]:
        return [
            self._event("response.created", response=self._snapshot()),
            self._event("response.in_progress", response=self._snapshot()),
        ]

    def feed(self, text: str, num_tokens: int = 0, final: bool = False) -> list[Event]:
        """The events a text delta releases (num_tokens: how many tokens it holds)."""
        was_inside = self.splitter.in_reasoning
        reasoning, content, calls = self.splitter.stream(text, final)
        thinking = reasoning or was_inside or self.splitter.in_reasoning  # markers count too
        if thinking and not content and not calls:
            self.reasoning_tokens += num_tokens
        events: list[Event] = []
        if reasoning:
            events += self._reasoning(reasoning)
        if content:
            events += self._content(content)
        for call in calls:
            events += self._call(call)
        return events

    def feed_delta(self, delta: TextDelta) -> None:
        """A non-streamed reply: the delta goes into the body; its events are not sent."""
        if delta.text:
            self.feed(delta.text, len(delta.token_ids))

    def _index(self) -> int:
        return len(self.body["output"]) - 1

    def _add(self, item: dict[str, Any]) -> list[Event]:
        events = self._close()
        self.body["output"].append(item)
        self.open = item
        return events + [
            self._event("response.output_item.added", output_index=self._index(), item=dict(item))
        ]

    def _reasoning(self, text: str) -> list[Event]:
        events: list[Event] = []
        if self.open is None or self.open["type"] != "reasoning":
            events += self._add({"id": new_id("rs"), "type": "reasoning", "summary": []})
            self.open_text = ""
        self.open_text += text
        where = {"item_id": self.open["id"], "output_index": self._index(), "content_index": 0}  # type: ignore[index]
        return events + [self._event("response.reasoning_text.delta", **where, delta=text)]

    def _content(self, text: str) -> list[Event]:
        events: list[Event] = []
        if self.open is None or self.open["type"] != "message":
            if not (self.held + text).strip():
                self.held += text
                return []
            text, self.held = self.held + text, ""
            item = {"id": new_id("msg"), "type": "message", "status": "in_progress"}
            events += self._add(item | {"role": "assistant", "content": []})
            self.open_text = ""
            events.append(
                self._event("response.content_part.added", **self._where(), part=self._part(""))
            )
        self.open_text += text
        return events + [
            self._event("response.output_text.delta", **self._where(), delta=text, logprobs=[])
        ]

    def _where(self) -> dict[str, Any]:
        assert self.open is not None
        return {"item_id": self.open["id"], "output_index": self._index(), "content_index": 0}

    @staticmethod
    def _part(text: str) -> dict[str, Any]:
        return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}

    def _call(self, event: CallStart | ArgsDelta | ToolCall) -> list[Event]:
        index = event.index if not isinstance(event, ToolCall) else self.splitter.calls.index(event)
        if index > 0 and not self.parallel:  # parallel_tool_calls false: the first call only
            return []
        events: list[Event] = []
        call_id = event.id if not isinstance(event, ArgsDelta) else None
        if call_id is not None and call_id not in self.calls:
            item = {"id": new_id("fc"), "type": "function_call", "status": "in_progress"}
            item |= {"call_id": call_id, "name": event.name, "arguments": ""}  # type: ignore[union-attr]
            self.calls[call_id] = item
            events += self._add(item)
        assert self.open is not None and self.open["type"] == "function_call"
        where = {"item_id": self.open["id"], "output_index": self._index()}
        if isinstance(event, ArgsDelta):
            self.open["arguments"] += event.text
            return events + [
                self._event("response.function_call_arguments.delta", **where, delta=event.text)
            ]
        if isinstance(event, ToolCall):
            rest = event.arguments[len(self.open["arguments"]) :]
            if rest and event.arguments.startswith(self.open["arguments"]):
                events.append(
                    self._event("response.function_call_arguments.delta", **where, delta=rest)
                )
            self.open["arguments"] = event.arguments
            tools = self.splitter.tools
            cut = tools is not None and tools.cut is not None and tools.cut[0] is event
            events += self._close("incomplete" if cut else "completed")
        return events

    def _close(self, status: str = "completed") -> list[Event]:
        item, self.open = self.open, None
        if item is None:
            return []
        index = self.body["output"].index(item)
        where = {"item_id": item["id"], "output_index": index}
        events: list[Event] = []
        if item["type"] == "reasoning":
            text = self.open_text
            item["content"] = [{"type": "reasoning_text", "text": text}]
            if self.summary:
                item["summary"] = [{"type": "summary_text", "text": text}]
            if self.encrypted:  # a local server keeps no secret from its user: the text itself
                item["encrypted_content"] = text
            events.append(
                self._event("response.reasoning_text.done", **where, content_index=0, text=text)
            )
        elif item["type"] == "message":
            part = self._part(self.open_text)
            item["content"] = [part]
            events.append(
                self._event(
                    "response.output_text.done",
                    **where,
                    content_index=0,
                    text=part["text"],
                    logprobs=[],
                )
            )
            events.append(
                self._event("response.content_part.done", **where, content_index=0, part=part)
            )
        else:
            events.append(
                self._event(
                    "response.function_call_arguments.done",
                    **where,
                    name=item["name"],
                    arguments=item["arguments"],
                )
            )
        item["status"] = status
        return events + [
            self._event("response.output_item.done", output_index=index, item=dict(item))
        ]

    def finish(self, fin: Finished) -> list[Event]:
        """The last events: the open item closed, then completed / incomplete / failed."""
        events = self.feed("", final=True)
        cut = self.splitter.cut or fin.reason in ("length", "loop")
        events += self._close("incomplete" if cut and self.open is not None else "completed")
        stats = fin.stats
        self.body["usage"] = {
            "input_tokens": stats.prompt_tokens,
            "input_tokens_details": {"cached_tokens": stats.cached_tokens},
            "output_tokens": stats.generated_tokens,
            "output_tokens_details": {"reasoning_tokens": self.reasoning_tokens},
            "total_tokens": stats.prompt_tokens + stats.generated_tokens,
        }
        if fin.reason == "error":
            self.body["status"] = "failed"
            code = "invalid_prompt" if fin.refused else "server_error"
            self.body["error"] = {"code": code, "message": fin.error or "generation failed"}
            return events + [self._event("response.failed", response=self._snapshot())]
        if cut:
            self.body["status"] = "incomplete"
            self.body["incomplete_details"] = {"reason": "max_output_tokens"}
            return events + [self._event("response.incomplete", response=self._snapshot())]
        self.body["status"] = "completed"
        return events + [self._event("response.completed", response=self._snapshot())]
