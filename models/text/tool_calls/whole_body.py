"""A call body parsed all at once: the fallback where a body cannot be read as it streams.

Used for Gemma's ```tool_code``` Python calls, for arguments written as a JSON string, and for
a body whose first item is not a call (the whole body is then judged together, as before).
"""

from __future__ import annotations

import ast
import json
from typing import Any

from ember.models.text.tool_calls.calls import ToolCall
from ember.models.text.tool_calls.formats import ToolFormat


def call_from(obj: Any, fmt: ToolFormat) -> ToolCall | None:
    """The call a parsed JSON object describes (None when it is not one)."""
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or not obj["name"]:
        return None
    args = obj.get(fmt.arguments_key, obj.get("arguments", obj.get("parameters", {})))
    if isinstance(args, str):  # some models write the arguments as a JSON string
        try:
            args = json.loads(args)
        except ValueError:
            return None
    if not isinstance(args, dict):
        return None
    return ToolCall(obj["name"], json.dumps(args, ensure_ascii=False))


def object_call(text: str, fmt: ToolFormat) -> ToolCall | None:
    """The call one JSON object's text describes."""
    try:
        return call_from(json.loads(text), fmt)
    except (ValueError, RecursionError):
        return None


def json_calls(body: str, fmt: ToolFormat) -> list[ToolCall] | None:
    body = body.strip()
    if fmt.name == "mistral" and body and body[0] not in "[{" and "[ARGS]" in body:
        name, _, args = body.partition("[ARGS]")  # newer Mistral: NAME[ARGS]{...}
        body = json.dumps({"name": name.strip(), "arguments": args.strip()})
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return None
    items = value if isinstance(value, list) else [value]
    calls = [call_from(item, fmt) for item in items]
    if not calls or any(c is None for c in calls):
        return None
    return [c for c in calls if c is not None]


def python_calls(body: str) -> list[ToolCall] | None:
    """Gemma's `name(key=value, ...)` lines: keyword arguments with literal values only."""
    calls = []
    for line in (x.strip() for x in body.strip().splitlines()):
        if not line:
            continue
        try:
            node = ast.parse(line, mode="eval").body
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name) or node.args:
                return None
            args = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg}
            calls.append(ToolCall(node.func.id, json.dumps(args, ensure_ascii=False)))
        except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
            return None
    return calls or None
