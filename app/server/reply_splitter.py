"""A chat reply's text deltas split into reasoning, content and tool calls, incrementally.

The think splitter puts <think>...</think> apart; the tool-call parser of the model's format
takes the calls out of the content. Used by the OpenAI and Ollama APIs and by the TUI.
"""

from __future__ import annotations

from ember.models.text.think_splitter import ThinkSplitter
from ember.models.text.tool_calls import ToolCall, ToolCallParser, tool_format


class ReplySplitter:
    """Text deltas -> (reasoning, content, tool calls), incrementally."""

    def __init__(self, fmt_name: str, parse_tools: bool) -> None:
        self.think = ThinkSplitter()
        self.tools = ToolCallParser(tool_format(fmt_name)) if parse_tools else None
        self.calls: list[ToolCall] = []

    def feed(self, text: str, final: bool = False) -> tuple[str, str, list[ToolCall]]:
        reasoning, content = self.think.feed(text)
        if final:
            more_r, more_c = self.think.finish()
            reasoning, content = reasoning + more_r, content + more_c
        if self.tools is None:
            return reasoning, content, []
        parts = self.tools.feed(content) + (self.tools.finish() if final else [])
        calls = [p for p in parts if isinstance(p, ToolCall)]
        self.calls += calls
        return reasoning, "".join(p for p in parts if isinstance(p, str)), calls
