"""A chat reply's text deltas split into reasoning, content and tool calls, incrementally.

The think splitter puts <think>...</think> apart; the tool-call parser of the model's format
takes the calls out of the content. `stream()` gives every call event (a call's start and its
arguments as they are written, for OpenAI's streamed deltas); `feed()` only whole calls (the
Ollama API and the TUI), and gives a call that the reply's end cut short back as text.
"""

from __future__ import annotations

from ember.models.text.think_splitter import ThinkSplitter
from ember.models.text.tool_calls import ArgsDelta, CallStart, ToolCall, ToolCallParser, tool_format

CallEvent = CallStart | ArgsDelta | ToolCall


class ReplySplitter:
    """Text deltas -> (reasoning, content, tool calls), incrementally; one of stream() or
    feed() per reply."""

    def __init__(self, fmt_name: str, parse_tools: bool) -> None:
        self.think = ThinkSplitter()
        self.tools = ToolCallParser(tool_format(fmt_name)) if parse_tools else None
        self.calls: list[ToolCall] = []

    @property
    def cut(self) -> bool:
        """The reply ended inside a call's arguments (its last call is incomplete)."""
        return self.tools is not None and self.tools.cut is not None

    def stream(self, text: str, final: bool = False) -> tuple[str, str, list[CallEvent]]:
        """(reasoning, content, call events in the reply's order)."""
        reasoning, content = self.think.feed(text)
        if final:
            more_r, more_c = self.think.finish()
            reasoning, content = reasoning + more_r, content + more_c
        if self.tools is None:
            return reasoning, content, []
        parts = self.tools.feed(content) + (self.tools.finish() if final else [])
        events = [p for p in parts if not isinstance(p, str)]
        self.calls += [p for p in events if isinstance(p, ToolCall)]
        return reasoning, "".join(p for p in parts if isinstance(p, str)), events

    def feed(self, text: str, final: bool = False) -> tuple[str, str, list[ToolCall]]:
        """(reasoning, content, the calls that ended)."""
        reasoning, content, events = self.stream(text, final)
        calls = [e for e in events if isinstance(e, ToolCall)]
        if final and self.tools is not None and self.tools.cut is not None:
            call, text = self.tools.cut  # arguments cut short: not a call to run
            calls.remove(call)
            self.calls.remove(call)
            content += text
        return reasoning, content, calls
