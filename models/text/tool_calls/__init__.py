"""Tool calls: formats per model family, rendering through the template, parsing, grammars.

fmt = detect_tool_format(template.source)        # hermes | llama3 | mistral | generic
messages, tools = template_inputs(msgs, tools, fmt)
parser = ToolCallParser(fmt); parts = parser.feed(delta) + parser.finish()
    # parts: content str, CallStart, ArgsDelta (streamed arguments), ToolCall
grammar = tool_call_grammar(tools, fmt, special_id)   # tool_choice required / named
"""

from ember.models.text.tool_calls.calls import ArgsDelta, CallStart, ToolCall, new_call_id
from ember.models.text.tool_calls.formats import (
    FORMATS,
    GENERIC,
    CallShape,
    ToolFormat,
    detect_tool_format,
    tool_format,
)
from ember.models.text.tool_calls.grammar import call_schema, tool_call_grammar
from ember.models.text.tool_calls.parser import ParsedReply, ToolCallParser, parse_tool_calls
from ember.models.text.tool_calls.render import template_inputs

__all__ = [
    "ArgsDelta",
    "CallStart",
    "FORMATS",
    "GENERIC",
    "CallShape",
    "ParsedReply",
    "ToolCall",
    "ToolCallParser",
    "ToolFormat",
    "call_schema",
    "detect_tool_format",
    "new_call_id",
    "parse_tool_calls",
    "template_inputs",
    "tool_call_grammar",
    "tool_format",
]
