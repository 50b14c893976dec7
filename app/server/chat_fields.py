"""The chat fields beyond plain text: tools, tool_choice, tool turns, response_format, template
kwargs, and the refusal of every field Ember does not serve (400 naming it, never ignored)."""

from __future__ import annotations

import json
from typing import Any

from ember.app.server.errors import RequestInvalid
from ember.engine.api import ChatMessage, ConstraintSpec, ToolSpec
from ember.engine.errors import EngineError
from ember.engine.json_schema import prepare_schema
from ember.models.text.tool_calls import ToolCall

MAX_TOOLS = 128
MAX_SCHEMA_CHARS = 256 * 1024

# Fields a chat or completion body may carry; anything else is refused by name.
KNOWN = frozenset(
    {
        "model", "messages", "prompt", "stream", "stream_options", "max_tokens",
        "max_completion_tokens", "temperature", "top_p", "top_k", "min_p", "presence_penalty",
        "frequency_penalty", "repeat_penalty", "seed", "stop", "n", "tools", "tool_choice",
        "parallel_tool_calls", "response_format", "chat_template_kwargs", "user", "logprobs",
        "top_logprobs", "ignore_eos", "stop_token_ids", "repetition_penalty", "dry_multiplier", "dry_base",
        "dry_allowed_length", "dry_penalty_last_n", "dry_sequence_breakers", "logit_bias",
    }
)  # fmt: skip


def refuse_unknown(body: dict[str, Any]) -> None:
    """400 naming the first field Ember does not serve."""
    for key in body:
        if key not in KNOWN:
            raise RequestInvalid(str(key)[:64], "is not supported by this server")


def _object(value: Any, param: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise RequestInvalid(param, "must be an object")
    return value


def schema_text(schema: Any, param: str) -> str:
    if not isinstance(schema, dict):
        raise RequestInvalid(param, "must be a JSON Schema object")
    check_schema(schema, param)
    text = json.dumps(schema)
    if len(text) > MAX_SCHEMA_CHARS:
        raise RequestInvalid(param, f"exceeds {MAX_SCHEMA_CHARS} characters")
    return text


def check_schema(schema: Any, param: str, status: int = 422) -> None:
    """The engine's limits on a client's JSON schema (depth, size, endless $ref recursion,
    patterns), checked here so the refusal names the field before anything is queued."""
    try:
        prepare_schema(schema, "schema")
    except EngineError as exc:
        raise RequestInvalid(param, str(exc).removeprefix("schema: "), status=status) from None


def parse_tools(body: dict[str, Any]) -> tuple[tuple[ToolSpec, ...], str]:
    """(tools, tool_choice) of a chat body."""
    raw = body.get("tools")
    tools: list[ToolSpec] = []
    if raw is not None:
        if not isinstance(raw, list) or len(raw) > MAX_TOOLS:
            raise RequestInvalid("tools", f"must be a list of at most {MAX_TOOLS} tools")
        for i, item in enumerate(raw):
            item = _object(item, f"tools[{i}]")
            if item.get("type") != "function":
                raise RequestInvalid(f"tools[{i}].type", "only 'function' tools are supported")
            fn = _object(item.get("function"), f"tools[{i}].function")
            params = fn.get("parameters")
            if params is not None:
                json.loads(schema_text(params, f"tools[{i}].function.parameters"))
            description = fn.get("description", "")
            if not isinstance(description, str):
                raise RequestInvalid(f"tools[{i}].function.description", "must be a string")
            try:
                tools.append(ToolSpec(str(fn.get("name", "")), description, params))
            except EngineError as exc:
                raise RequestInvalid(f"tools[{i}].function.name", str(exc)) from None
    return tuple(tools), _tool_choice(body.get("tool_choice"), tools)


def _tool_choice(value: Any, tools: list[ToolSpec]) -> str:
    if value is None:
        return "auto"
    if isinstance(value, str):
        if value not in ("auto", "none", "required"):
            raise RequestInvalid("tool_choice", "must be auto, none, required or a function")
        if value == "required" and not tools:
            raise RequestInvalid("tool_choice", "'required' needs tools")
        return value
    choice = _object(value, "tool_choice")
    name = (
        choice.get("function", {}).get("name") if isinstance(choice.get("function"), dict) else None
    )
    if choice.get("type") != "function" or not isinstance(name, str):
        raise RequestInvalid(
            "tool_choice", 'must be {"type": "function", "function": {"name": ...}}'
        )
    if name not in {t.name for t in tools}:
        raise RequestInvalid("tool_choice.function.name", f"no tool named {name!r}")
    return name


def parse_tool_calls(value: Any, index: int) -> tuple[ToolCall, ...]:
    """An assistant message's tool_calls."""
    if value is None:
        return ()
    param = f"messages[{index}].tool_calls"
    if not isinstance(value, list) or len(value) > MAX_TOOLS:
        raise RequestInvalid(param, "must be a list")
    calls = []
    for j, item in enumerate(value):
        fn = _object(_object(item, f"{param}[{j}]").get("function"), f"{param}[{j}].function")
        name, arguments = fn.get("name"), fn.get("arguments", "{}")
        if not isinstance(name, str) or not name or not isinstance(arguments, str):
            raise RequestInvalid(f"{param}[{j}].function", "needs a name and arguments (text)")
        try:  # a template renders them as JSON: text that is not JSON would break the prompt
            parsed = json.loads(arguments or "{}")
        except (ValueError, RecursionError):
            parsed = None
        if not isinstance(parsed, dict):
            raise RequestInvalid(f"{param}[{j}].function.arguments", "must be a JSON object (text)")
        call_id = item.get("id") or f"call_{index}_{j}"
        calls.append(ToolCall(name, arguments, str(call_id)))
    return tuple(calls)


def reasoning_content(item: dict[str, Any], index: int) -> str:
    """An assistant turn's reasoning sent back (what reasoning_content returned; "" if none)."""
    value = item.get("reasoning_content")
    if value is not None and not isinstance(value, str):
        raise RequestInvalid(f"messages[{index}].reasoning_content", "must be a string")
    return value or ""


def tool_message(item: dict[str, Any], index: int, content: str) -> ChatMessage:
    call_id = item.get("tool_call_id", "")
    name = item.get("name", "")
    if not isinstance(call_id, str) or not isinstance(name, str):
        raise RequestInvalid(f"messages[{index}].tool_call_id", "must be a string")
    return ChatMessage("tool", content, tool_call_id=call_id, name=name)


def parse_response_format(body: dict[str, Any]) -> ConstraintSpec | None:
    """response_format text | json_object | json_schema (strict or not: always enforced)."""
    value = body.get("response_format")
    if value is None:
        return None
    fmt = _object(value, "response_format")
    kind = fmt.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return ConstraintSpec("json_object")
    if kind == "json_schema":
        spec = _object(fmt.get("json_schema"), "response_format.json_schema")
        if "schema" not in spec:
            raise RequestInvalid("response_format.json_schema.schema", "is required")
        text = schema_text(spec["schema"], "response_format.json_schema.schema")
        return ConstraintSpec("json_schema", text)
    raise RequestInvalid("response_format.type", "must be text, json_object or json_schema")


def parse_template_kwargs(body: dict[str, Any]) -> dict[str, Any]:
    """chat_template_kwargs (vLLM's name), e.g. {"enable_thinking": false}."""
    value = body.get("chat_template_kwargs")
    if value is None:
        return {}
    kwargs = _object(value, "chat_template_kwargs")
    if len(json.dumps(kwargs)) > 4096:
        raise RequestInvalid("chat_template_kwargs", "exceeds 4096 characters")
    return kwargs
