"""A reply's parts as it grows (reasoning, text, tool calls, tool results), and those parts as the
turns the model reads again: the assistant's text with the calls it made, then one `tool` turn
per result, then its text after the results. Reasoning goes back only with a turn that made
calls (ChatMessage.reasoning, which only a harmony template renders: gpt-oss keeps a tool-calling
turn's analysis in view, and drops other past thinking, as every other template does)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from ember.app.history.parts import MessagePart, joined_text
from ember.engine.api import ChatMessage, ToolCall


def add_text(parts: list[MessagePart], kind: str, text: str) -> None:
    """Append streamed text to the last part of that kind, or start one after other parts."""
    if not text:
        return
    if parts and parts[-1].kind == kind:
        parts[-1] = MessagePart(parts[-1].kind, parts[-1].text + text)
    else:
        parts.append(MessagePart(kind, text))  # type: ignore[arg-type]


def call_part(call: ToolCall) -> MessagePart:
    return MessagePart("tool_call", name=call.name, arguments=call.arguments, call_id=call.id)


def result_part(call: ToolCall, text: str, status: str) -> MessagePart:
    return MessagePart("tool_result", text, name=call.name, call_id=call.id, status=status)  # type: ignore[arg-type]


def calls_of(parts: Iterable[MessagePart]) -> list[ToolCall]:
    """The calls among parts, as the parser made them."""
    return [
        ToolCall(p.name, p.arguments or "{}", p.call_id) for p in parts if p.kind == "tool_call"
    ]


def unanswered(parts: list[MessagePart]) -> list[ToolCall]:
    """Calls that have no result yet, in order."""
    answered = {p.call_id for p in parts if p.kind == "tool_result"}
    return [c for c in calls_of(parts) if c.id not in answered]


def assistant_turns(parts: Iterable[MessagePart], content: str) -> list[ChatMessage]:
    """A stored reply as the model reads it: plain text alone, or text + calls, results, more
    text... (a reply without parts is its content)."""
    parts = list(parts)
    if not any(p.kind in ("tool_call", "tool_result") for p in parts):
        text = joined_text(parts) if parts else content
        return [ChatMessage("assistant", text)] if text else []
    turns: list[ChatMessage] = []
    text, calls, reasoning = "", list[ToolCall](), ""
    for part in parts:
        if part.kind in ("text", "reasoning") and calls:  # after the results: the next turn
            text, calls, reasoning = "", [], ""
        if part.kind == "text":
            text += part.text
        elif part.kind == "reasoning":
            reasoning += part.text
        elif part.kind == "tool_call":
            if not calls:
                turns.append(ChatMessage("assistant", text, tool_calls=(), reasoning=reasoning))
            calls.append(ToolCall(part.name, part.arguments or "{}", part.call_id))
            turns[-1] = dataclasses.replace(turns[-1], tool_calls=tuple(calls))
        elif part.kind == "tool_result":
            turns.append(ChatMessage("tool", part.text, tool_call_id=part.call_id, name=part.name))
    if text and not calls:
        turns.append(ChatMessage("assistant", text))
    return turns
