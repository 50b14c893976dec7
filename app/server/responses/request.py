"""A /v1/responses body -> the one engine request, through the chat parser (schema.parse_chat).

The Responses fields are renamed onto Chat's (max_output_tokens -> max_tokens, text.format ->
response_format, flat function tools -> nested ones, reasoning.effort -> the template's
thinking switch and the engine's reasoning budget) so sampling, tools and the constraint are read in one place; an error from
that parser is renamed back, so it names the field the client sent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from ember.app.server.errors import RequestInvalid
from ember.app.server.responses.items import normalize_input, to_messages
from ember.app.server.schema import parse_chat
from ember.engine.api import GenerationRequest, SamplingParams

KNOWN = frozenset(
    {
        "model", "input", "instructions", "tools", "tool_choice", "parallel_tool_calls",
        "max_output_tokens", "temperature", "top_p", "text", "reasoning", "store",
        "previous_response_id", "stream", "metadata", "user", "include", "prompt_cache_key",
        "truncation",
    }
)  # fmt: skip
EFFORTS = ("none", "minimal", "low", "medium", "high")
# reasoning.effort -> the engine's reasoning budget (tokens in the <think> block; None:
# unbounded), at most half of max_output_tokens so the answer keeps room (docs/api.md)
EFFORT_BUDGETS: dict[str, int | None] = {
    "none": 0, "minimal": 0, "low": 1024, "medium": 4096, "high": None,
}  # fmt: skip
INCLUDES = ("reasoning.encrypted_content",)
# a chat parser's param -> the Responses field it came from
RENAMES = (
    (r"^max_tokens", "max_output_tokens"),
    (r"^response_format\.json_schema\.schema", "text.format.schema"),
    (r"^response_format(\.type)?", "text.format"),
    (r"^tools\[(\d+)\]\.function\.", r"tools[\1]."),
    (r"^tool_choice\.function\.name", "tool_choice.name"),
    (r"^chat_template_kwargs", "reasoning"),
    (r"^messages", "input"),
)


@dataclass(frozen=True)
class ResponsesRequest:
    """A validated Responses request: the engine request plus what the response echoes."""

    model: str | None
    stream: bool
    store: bool
    previous_response_id: str | None
    items: list[dict[str, Any]]  # the conversation so far: earlier responses' items + input
    request: GenerationRequest
    echo: dict[str, Any] = field(default_factory=dict)  # fields the response object repeats


def _invalid(param: str, reason: str) -> RequestInvalid:
    return RequestInvalid(param, reason, status=400)


def _choice(value: Any) -> Any:
    if isinstance(value, dict):
        if value.get("type") != "function" or not isinstance(value.get("name"), str):
            raise _invalid(
                "tool_choice", 'must be auto, none, required or {"type": "function", "name": ...}'
            )
        return {"type": "function", "function": {"name": value["name"]}}
    return value


def _tools(value: Any) -> list[dict[str, Any]] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise _invalid("tools", "must be a list")
    out = []
    for i, tool in enumerate(value):
        if not isinstance(tool, dict) or tool.get("type") != "function":
            raise _invalid(f"tools[{i}].type", "only 'function' tools are served")
        if tool.get("strict") not in (None, True, False):
            raise _invalid(f"tools[{i}].strict", "must be a boolean")
        fn = {k: tool[k] for k in ("name", "description", "parameters") if tool.get(k) is not None}
        out.append({"type": "function", "function": fn})  # calls are always schema-checked
    return out


def _format(text: Any) -> dict[str, Any] | None:
    if text is None:
        return None
    if not isinstance(text, dict) or set(text) - {"format", "verbosity"}:
        raise _invalid("text", "must be an object with format")
    if text.get("verbosity") not in (None, "medium"):
        raise _invalid("text.verbosity", "only 'medium' is served")
    fmt = text.get("format")
    if fmt is None:
        return None
    if not isinstance(fmt, dict):
        raise _invalid("text.format", "must be an object")
    if fmt.get("type") == "json_schema":
        if fmt.get("strict") not in (None, True, False):
            raise _invalid("text.format.strict", "must be a boolean")
        spec = {"name": fmt.get("name", "response"), "schema": fmt.get("schema")}
        return {"type": "json_schema", "json_schema": spec}
    return {"type": fmt.get("type")}


def _reasoning(value: Any) -> dict[str, Any] | None:
    """reasoning.effort -> the template's switches: enable_thinking (Qwen3 and the like) and
    reasoning_effort (gpt-oss); summary is accepted (the reasoning comes whole)."""
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) - {"effort", "summary", "generate_summary"}:
        raise _invalid("reasoning", "must be an object with effort and summary")
    effort = value.get("effort")
    if effort is None:
        return None
    if effort not in EFFORTS:
        raise _invalid("reasoning.effort", f"must be one of {', '.join(EFFORTS)}")
    thinking = effort not in ("none", "minimal")
    kwargs: dict[str, Any] = {"enable_thinking": thinking}
    if thinking:
        kwargs["reasoning_effort"] = effort
    return kwargs


def _budgeted(sampling: SamplingParams, reasoning: Any) -> SamplingParams:
    """sampling with reasoning.effort's budget (checked by _reasoning already)."""
    effort = reasoning.get("effort") if isinstance(reasoning, dict) else None
    budget = EFFORT_BUDGETS.get(effort) if isinstance(effort, str) else None
    if budget is None:
        return sampling
    return replace(sampling, reasoning_budget=min(budget, sampling.max_tokens // 2))


def _checked(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise _invalid("body", "must be a JSON object")
    for key in body:
        if key not in KNOWN:
            raise _invalid(str(key)[:64], "is not supported by this server")
    for key in ("store", "stream", "parallel_tool_calls"):
        if body.get(key) not in (None, True, False):
            raise _invalid(key, "must be a boolean")
    for key in ("instructions", "previous_response_id", "user", "prompt_cache_key"):
        if body.get(key) is not None and not isinstance(body[key], str):
            raise _invalid(key, "must be a string")
    metadata = body.get("metadata")
    if metadata is not None and (
        not isinstance(metadata, dict)
        or len(metadata) > 16
        or not all(
            isinstance(k, str) and isinstance(v, str) and len(v) <= 512 for k, v in metadata.items()
        )
    ):
        raise _invalid("metadata", "must be at most 16 string keys with string values")
    include = body.get("include") or []
    if not isinstance(include, list) or any(i not in INCLUDES for i in include):
        raise _invalid("include", f"may only list {', '.join(INCLUDES)}")
    if body.get("truncation") not in (None, "disabled"):
        raise _invalid("truncation", "only 'disabled' is served")
    return body


def _renamed(exc: RequestInvalid) -> RequestInvalid:
    param = exc.param
    for pattern, replacement in RENAMES:
        param = re.sub(pattern, replacement, param)
    return RequestInvalid(param, exc.reason, status=exc.status)


def parse_responses(
    body: Any, max_tokens_cap: int, earlier: list[dict[str, Any]] | None = None
) -> ResponsesRequest:
    """Validate a /v1/responses body; earlier: the stored items of previous_response_id."""
    body = _checked(body)
    if "input" not in body:
        raise _invalid("input", "is required")
    new_items = normalize_input(body["input"])
    context = list(earlier or [])
    messages = to_messages(context + new_items, body.get("instructions"), first=len(context))
    chat: dict[str, Any] = {
        "model": body.get("model"),
        "messages": messages,
        "tools": _tools(body.get("tools")),
        "tool_choice": _choice(body.get("tool_choice")),
        "parallel_tool_calls": body.get("parallel_tool_calls"),
        "max_tokens": body.get("max_output_tokens"),
        "temperature": body.get("temperature"),
        "top_p": body.get("top_p"),
        "response_format": _format(body.get("text")),
        "chat_template_kwargs": _reasoning(body.get("reasoning")),
    }
    try:
        parsed = parse_chat({k: v for k, v in chat.items() if v is not None}, max_tokens_cap)
    except RequestInvalid as exc:
        raise _renamed(exc) from None
    echo = {k: body.get(k) for k in ("instructions", "metadata", "user", "text", "reasoning")}
    echo |= {"tools": body.get("tools") or [], "tool_choice": body.get("tool_choice", "auto")}
    echo["include"] = body.get("include") or []
    echo["parallel_tool_calls"] = body.get("parallel_tool_calls", True)
    echo["max_output_tokens"] = body.get("max_output_tokens")
    sampling = _budgeted(parsed.request.sampling, body.get("reasoning"))
    echo |= {"temperature": sampling.temperature, "top_p": sampling.top_p}
    return ResponsesRequest(
        model=parsed.model,
        stream=bool(body.get("stream", False)),
        store=body.get("store", True) is not False,
        previous_response_id=body.get("previous_response_id"),
        items=context + new_items,
        request=replace(parsed.request, sampling=sampling),
        echo=echo,
    )
