"""OpenAI's streamed `tool_calls` delta entries for the call events of a reply.

A call whose arguments stream: first {index, id, type, function: {name, arguments: ""}}, then
{index, function: {arguments: fragment}} as the arguments are written (the fragments of one
text delta merged). A call that comes whole (call_body.py says which): one entry with all of it.
"""

from __future__ import annotations

from typing import Any

from ember.app.reply_splitter import CallEvent
from ember.models.text.tool_calls import ArgsDelta, CallStart, ToolCall


def tool_call_deltas(
    events: list[CallEvent], calls: list[ToolCall], started: set[str]
) -> list[dict[str, Any]]:
    """The entries, one per chunk; calls: the reply's calls so far (for a whole call's index);
    started: ids of the calls already announced (updated)."""
    out: list[dict[str, Any]] = []
    for event in events:
        if isinstance(event, CallStart):
            started.add(event.id)
            function = {"name": event.name, "arguments": ""}
            out.append(
                {"index": event.index, "id": event.id, "type": "function", "function": function}
            )
        elif isinstance(event, ArgsDelta):
            last = out[-1] if out else None
            if last is not None and last["index"] == event.index and "id" not in last:
                last["function"]["arguments"] += event.text
            else:
                out.append({"index": event.index, "function": {"arguments": event.text}})
        elif event.id not in started:
            out.append({"index": calls.index(event), **event.to_openai()})
    return out
