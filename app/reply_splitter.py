"""A chat reply's text deltas split into reasoning, content and tool calls, incrementally.

The think splitter puts <think>...</think> apart; the tool-call parser of the model's format
takes the calls out of the content. A harmony model (gpt-oss; tool format "harmony") writes
channel messages instead, which models/text/harmony reads whole: analysis is the reasoning,
final the content, commentary to=functions.NAME the calls. `stream()` gives every call event
(a call's start and its arguments as they are written, for OpenAI's streamed deltas); `feed()`
only whole calls (the Ollama API and the TUI), and gives a call that the reply's end cut short
back as text.
"""

from __future__ import annotations

from ember.models.text.harmony import HarmonyReply
from ember.models.text.think_splitter import ThinkSplitter
from ember.models.text.tool_calls import ArgsDelta, CallStart, ToolCall, ToolCallParser, tool_format

CallEvent = CallStart | ArgsDelta | ToolCall


class ReplySplitter:
    """Text deltas -> (reasoning, content, tool calls), incrementally; one of stream() or
    feed() per reply."""

    def __init__(self, fmt_name: str, parse_tools: bool) -> None:
        fmt = tool_format(fmt_name)
        self.harmony = HarmonyReply(parse_tools) if fmt.channels else None
        self.think = ThinkSplitter()
        self.tools = ToolCallParser(fmt) if parse_tools and not fmt.channels else None
        self.calls: list[ToolCall] = []

    @property
    def _cut(self) -> tuple[ToolCall, str] | None:
        parser = self.harmony or self.tools
        return None if parser is None else parser.cut

    @property
    def cut(self) -> bool:
        """The reply ended inside a call's arguments (its last call is incomplete)."""
        return self._cut is not None

    @property
    def in_reasoning(self) -> bool:
        """The reply is inside its reasoning now."""
        return self.harmony.inside if self.harmony is not None else self.think.inside

    def stream(self, text: str, final: bool = False) -> tuple[str, str, list[CallEvent]]:
        """(reasoning, content, call events in the reply's order)."""
        if self.harmony is not None:
            reasoning, content, events = self.harmony.feed(text)
            if final:
                more_r, more_c, more_e = self.harmony.finish()
                reasoning, content, events = reasoning + more_r, content + more_c, events + more_e
            self.calls += [e for e in events if isinstance(e, ToolCall)]
            return reasoning, content, events
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
        cut = self._cut
        if final and cut is not None:
            call, text = cut  # arguments cut short: not a call to run
            calls.remove(call)
            self.calls.remove(call)
            content += text
        return reasoning, content, calls
