"""The grammar that forces a tool call: `tool_choice` "required" or a named function.

A Lark grammar (llguidance's dialect) in the format's primary shape, with the call's JSON
inlined through `%json {schema}`: the name is one of the allowed tools' names, the arguments
match that tool's parameter schema. Markers that are special tokens of the vocabulary (Qwen's
<tool_call>, Mistral's [TOOL_CALLS], Llama's <|python_tag|>) are written as the token itself
(`<[id]>`), as the model was trained to emit them; others as text.

Harmony (gpt-oss) calls are a commentary message to the function: its header names the tool
and the body is the arguments object alone, so each allowed tool is one alternative of header
and arguments schema; the message goes straight to the call (no analysis before it).

So that even a small model returns a well-formed call, an object schema that lists properties
but does not say whether others are allowed gets `additionalProperties: false` (OpenAI's strict
mode asks for the same), and the JSON is single-line with the usual separators.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from ember.models.text.tool_calls.formats import ToolFormat

JSON_STYLE = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}
EMPTY_OBJECT: dict[str, Any] = {"type": "object", "properties": {}}


def _strict(schema: Any, depth: int = 0) -> Any:
    """Close objects that list their properties (recursively, bounded depth)."""
    if not isinstance(schema, dict) or depth > 32:
        return schema
    out = dict(schema)
    if isinstance(out.get("properties"), dict):
        out.setdefault("additionalProperties", False)
        out["properties"] = {k: _strict(v, depth + 1) for k, v in out["properties"].items()}
    for key in ("items", "additionalProperties"):
        if isinstance(out.get(key), dict):
            out[key] = _strict(out[key], depth + 1)
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(out.get(key), list):
            out[key] = [_strict(v, depth + 1) for v in out[key]]
    return out


def call_schema(tools: Sequence[dict[str, Any]], fmt: ToolFormat) -> dict[str, Any]:
    """JSON schema of one call to any of tools (each {"name", "parameters"})."""
    options = []
    for tool in tools:
        params = tool.get("parameters") or EMPTY_OBJECT
        options.append(
            {
                "type": "object",
                "properties": {"name": {"const": tool["name"]}, fmt.arguments_key: _strict(params)},
                "required": ["name", fmt.arguments_key],
                "additionalProperties": False,
            }
        )
    schema: dict[str, Any] = options[0] if len(options) == 1 else {"anyOf": options}
    return {**schema, "x-guidance": JSON_STYLE}


def _literal(text: str, special_id: Callable[[str], int | None]) -> str:
    token = special_id(text)
    return f"<[{token}]>" if token is not None else json.dumps(text)


def tool_call_grammar(
    tools: Sequence[dict[str, Any]],
    fmt: ToolFormat,
    special_id: Callable[[str], int | None] = lambda text: None,
) -> str:
    """Lark grammar of exactly one call to one of tools, in fmt's primary shape."""
    if not tools:
        raise ValueError("tool_choice needs at least one tool")
    if fmt.channels:
        return _channel_grammar(tools, special_id)
    body = f"%json {json.dumps(call_schema(tools, fmt), ensure_ascii=False)}"
    shape = fmt.primary
    if fmt.list_body:
        body = f'"[" {body} "]"'
    if fmt.bare_json:  # llama3: the reply is the JSON object itself
        return f"start: {body}\n"
    parts = [_literal(shape.open, special_id), '"\\n"', body]
    if shape.close:
        parts += ['"\\n"', _literal(shape.close, special_id)]
    return "start: " + " ".join(parts) + "\n"


def _channel_grammar(
    tools: Sequence[dict[str, Any]], special_id: Callable[[str], int | None]
) -> str:
    """Harmony: <|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{args}."""
    token = {t: _literal(t, special_id) for t in ("<|channel|>", "<|constrain|>", "<|message|>")}
    rules = []
    for i, tool in enumerate(tools):
        args = {**_strict(tool.get("parameters") or EMPTY_OBJECT), "x-guidance": JSON_STYLE}
        header = json.dumps(f"{tool['name']} ")
        rules.append(
            f"call_{i}: {header} {token['<|constrain|>']} \"json\" {token['<|message|>']} "
            f"%json {json.dumps(args, ensure_ascii=False)}"
        )
    calls = " | ".join(f"call_{i}" for i in range(len(tools)))
    start = f'start: {token["<|channel|>"]} "commentary to=functions." ({calls})'
    return "\n".join([start, *rules]) + "\n"
