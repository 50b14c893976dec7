"""Responses input items -> chat messages (OpenAI Chat's shape, which schema.parse_chat reads).

An item is a message (role user / assistant / system / developer; content a string or
input_text / output_text / refusal parts), a function_call (an assistant's call, with call_id),
a function_call_output (the call's result, naming its call_id) or a reasoning item. Consecutive
function_calls become one assistant turn with several tool_calls. Reasoning items are accepted
and not rendered: chat templates drop earlier turns' reasoning (docs/api.md).
"""

from __future__ import annotations

import json
from typing import Any

from ember.app.server.errors import RequestInvalid

MAX_ITEMS = 1024
TEXT_PARTS = ("input_text", "output_text", "refusal", "text", "summary_text", "reasoning_text")
ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}


def normalize_input(value: Any) -> list[dict[str, Any]]:
    """The request's `input` as a list of item objects (a string is one user message)."""
    if isinstance(value, str):
        if not value:
            raise RequestInvalid("input", "must not be empty", status=400)
        return [{"type": "message", "role": "user", "content": value}]
    if not isinstance(value, list) or not value:
        raise RequestInvalid("input", "must be a string or a non-empty list of items", status=400)
    if len(value) > MAX_ITEMS:
        raise RequestInvalid("input", f"at most {MAX_ITEMS} items", status=400)
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise RequestInvalid(f"input[{i}]", "must be an object", status=400)
    return value


def _text(value: Any, param: str) -> str:
    """A content string or a list of text parts, joined."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise RequestInvalid(param, "must be a string or a list of content parts", status=400)
    texts = []
    for j, part in enumerate(value):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("input_image", "input_file", "input_audio"):
            raise RequestInvalid(f"{param}[{j}]", f"{kind} is not supported: text only", status=400)
        if kind not in TEXT_PARTS:
            raise RequestInvalid(
                f"{param}[{j}].type", f"must be one of {', '.join(TEXT_PARTS)}", status=400
            )
        key = "refusal" if kind == "refusal" else "text"
        if not isinstance(part.get(key), str):
            raise RequestInvalid(f"{param}[{j}].{key}", "must be a string", status=400)
        texts.append(part[key])
    return "".join(texts)


def _string(item: dict[str, Any], key: str, param: str) -> str:
    value = item.get(key)
    if not isinstance(value, str) or not value:
        raise RequestInvalid(f"{param}.{key}", "must be a non-empty string", status=400)
    return value


def _call(item: dict[str, Any], param: str) -> dict[str, Any]:
    call_id, name = _string(item, "call_id", param), _string(item, "name", param)
    arguments = item.get("arguments", "{}")
    if not isinstance(arguments, str):
        raise RequestInvalid(f"{param}.arguments", "must be a string (JSON text)", status=400)
    try:
        parsed = json.loads(arguments or "{}")
    except (ValueError, RecursionError):
        raise RequestInvalid(f"{param}.arguments", "is not valid JSON", status=400) from None
    if not isinstance(parsed, dict):
        raise RequestInvalid(f"{param}.arguments", "must be a JSON object", status=400)
    function = {"name": name, "arguments": arguments or "{}"}
    return {"id": call_id, "type": "function", "function": function}


def _reasoning_text(item: dict[str, Any], param: str) -> str:
    """A reasoning item's text: its reasoning_text content (what Ember's output items carry), else
    its summary_text parts; the chat template decides what of it a model sees again (only
    harmony's gpt-oss templates keep a tool-calling turn's analysis)."""
    texts: dict[str, list[str]] = {}
    for key, part_type in (("content", "reasoning_text"), ("summary", "summary_text")):
        parts = item.get(key) or []
        if not isinstance(parts, list):
            raise RequestInvalid(f"{param}.{key}", "must be a list", status=400)
        for j, part in enumerate(parts):
            if not isinstance(part, dict) or not isinstance(part.get("text"), str):
                raise RequestInvalid(
                    f"{param}.{key}[{j}]", f"must be a {part_type} part with text", status=400
                )
            texts.setdefault(key, []).append(part["text"])
    return "".join(texts.get("content") or texts.get("summary") or [])


def to_messages(
    items: list[dict[str, Any]], instructions: str | None, first: int = 0
) -> list[dict[str, Any]]:
    """Chat messages for items (those before index `first` came from previous responses; errors
    name the others as input[i - first])."""
    messages: list[dict[str, Any]] = []
    if instructions:
        messages.append({"role": "system", "content": instructions})
    names: dict[str, str] = {}  # call_id -> function name, for the outputs
    reasoning = ""  # a reasoning item's text, for the assistant turn that follows it
    for i, item in enumerate(items):
        param = f"input[{i - first}]"
        kind = item.get("type", "message")
        if kind == "message":
            role = ROLES.get(item.get("role"))  # type: ignore[arg-type]
            if role is None:
                raise RequestInvalid(
                    f"{param}.role", "must be user, assistant, system or developer", status=400
                )
            messages.append(
                {"role": role, "content": _text(item.get("content"), f"{param}.content")}
            )
        elif kind == "function_call":
            call = _call(item, param)
            names[call["id"]] = call["function"]["name"]
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant":
                last.setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        elif kind == "function_call_output":
            call_id = _string(item, "call_id", param)
            if call_id not in names:
                raise RequestInvalid(
                    f"{param}.call_id",
                    f"no function_call with call_id {call_id!r} before it",
                    status=400,
                )
            output = _text(item.get("output"), f"{param}.output")
            messages.append(
                {"role": "tool", "tool_call_id": call_id, "name": names[call_id], "content": output}
            )
        elif kind == "reasoning":
            reasoning += _reasoning_text(item, param)
        else:
            raise RequestInvalid(
                f"{param}.type",
                "must be message, function_call, function_call_output or reasoning",
                status=400,
            )
        if reasoning and kind != "reasoning":  # every other item made or joined messages[-1]
            turn = messages[-1]  # an assistant turn takes it; a user or tool turn has none
            if turn["role"] == "assistant":
                turn["reasoning_content"] = turn.get("reasoning_content", "") + reasoning
            reasoning = ""
    if not any(m["role"] != "system" for m in messages):
        raise RequestInvalid("input", "holds no message to answer", status=400)
    return messages
