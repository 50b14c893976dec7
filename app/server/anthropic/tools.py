"""Anthropic's `tools` (name, description, input_schema) and `tool_choice` (auto, any, tool,
none) onto the engine's ToolSpecs and tool_choice: any is "required" and tool is the tool's
name, both enforced by the engine's tool-call grammar, so even a small model answers with a
well-formed call. disable_parallel_tool_use keeps the reply to its first call."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ember.app.server.anthropic.blocks import depth_check
from ember.app.server.chat_fields import MAX_TOOLS, schema_text
from ember.app.server.errors import RequestInvalid
from ember.engine.api import ToolSpec
from ember.engine.errors import EngineError

# eager_input_streaming: a call's input always streams as it is written here; strict: calls
# under tool_choice any/tool follow the schema by grammar (under auto the model may stray)
TOOL_KEYS = frozenset(
    {"type", "name", "description", "input_schema", "cache_control", "eager_input_streaming",
     "strict"}
)  # fmt: skip


@dataclass(frozen=True)
class ToolChoice:
    """The engine's tool_choice, and whether the reply may hold more than one call."""

    engine: str = "auto"
    single_call: bool = False


def _tool(item: Any, param: str) -> ToolSpec:
    if not isinstance(item, dict):
        raise RequestInvalid(param, "must be an object", status=400)
    kind = item.get("type", "custom")
    if kind != "custom":
        raise RequestInvalid(
            f"{param}.type", f"{str(kind)[:40]!r} is an Anthropic server tool; only custom tools "
            "(name, description, input_schema) run here", status=400,
        )  # fmt: skip
    for key in item:
        if key not in TOOL_KEYS:
            raise RequestInvalid(f"{param}.{str(key)[:40]}", "is not a field of a tool", 400)
    for flag in ("eager_input_streaming", "strict"):
        if item.get(flag) not in (None, True, False):
            raise RequestInvalid(f"{param}.{flag}", "must be a boolean", status=400)
    schema = item.get("input_schema")
    depth_check(schema, f"{param}.input_schema")
    try:
        schema = json.loads(schema_text(schema, f"{param}.input_schema"))
    except RequestInvalid as exc:
        raise RequestInvalid(exc.param, exc.reason, status=400) from None
    if schema.get("type") != "object":
        raise RequestInvalid(f"{param}.input_schema.type", "must be 'object'", status=400)
    description = item.get("description", "")
    if not isinstance(description, str):
        raise RequestInvalid(f"{param}.description", "must be a string", status=400)
    try:
        return ToolSpec(str(item.get("name", "")), description, schema)
    except EngineError as exc:
        raise RequestInvalid(f"{param}.name", str(exc), status=400) from None


def parse_tools(raw: Any) -> tuple[ToolSpec, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or len(raw) > MAX_TOOLS:
        raise RequestInvalid("tools", f"must be a list of at most {MAX_TOOLS} tools", status=400)
    tools = tuple(_tool(item, f"tools[{i}]") for i, item in enumerate(raw))
    names = [t.name for t in tools]
    if len(set(names)) != len(names):
        raise RequestInvalid("tools", "two tools have the same name", status=400)
    return tools


def parse_tool_choice(value: Any, tools: tuple[ToolSpec, ...]) -> ToolChoice:
    if value is None:
        return ToolChoice()
    if not isinstance(value, dict):
        raise RequestInvalid("tool_choice", "must be an object with a type", status=400)
    for key in value:
        if key not in ("type", "name", "disable_parallel_tool_use"):
            raise RequestInvalid(f"tool_choice.{str(key)[:40]}", "is not a field", status=400)
    kind, single = value.get("type"), value.get("disable_parallel_tool_use", False)
    if not isinstance(single, bool):
        raise RequestInvalid("tool_choice.disable_parallel_tool_use", "must be a boolean", 400)
    if kind == "none":
        return ToolChoice("none")
    if kind in ("any", "tool") and not tools:
        raise RequestInvalid("tool_choice", f"{kind!r} needs tools", status=400)
    if kind == "auto":
        return ToolChoice("auto", single)
    if kind == "any":
        return ToolChoice("required", single)
    if kind == "tool":
        name = value.get("name")
        if name not in {t.name for t in tools}:
            raise RequestInvalid("tool_choice.name", f"no tool named {str(name)[:64]!r}", 400)
        return ToolChoice(str(name), single)
    raise RequestInvalid("tool_choice.type", "must be auto, any, tool or none", status=400)
