"""Conversations with tools into what a chat template reads.

Messages arrive as dicts in OpenAI's shape: assistant `tool_calls` (arguments as JSON text),
`tool` messages with `tool_call_id` and `name`. A native template gets them as Hugging Face
templates expect: `tools` as [{"type": "function", "function": {...}}], tool-call arguments as
dicts. A template that knows no tools gets Ember's generic format instead: the tool list and
the call syntax in the system prompt, earlier calls written into the assistant's text, tool
results as user turns in <tool_response> blocks, and same-role neighbours merged so templates
that insist on alternating turns (Gemma's) accept the conversation.

An assistant turn's past reasoning (`reasoning_content`, when a client sent it back) reaches
only a harmony template, as the `thinking` it reads: harmony keeps the analysis of a turn that
made tool calls until a final answer follows, and the template drops the rest itself. Other
templates get the turns as before, without it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ember.models.text.tool_calls.formats import ToolFormat

Message = dict[str, Any]

GENERIC_INSTRUCTIONS = (
    "You can call these tools (JSON Schema of each one's arguments):\n{tools}\n\n"
    "To call a tool, reply with exactly this and nothing else:\n"
    '<tool_call>\n{{"name": "<tool name>", "arguments": {{<arguments as JSON>}}}}\n</tool_call>\n'
    "A tool's result comes back in a <tool_response> block."
)


def openai_tools(tools: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """[{"name", "description", "parameters"}] as templates read them (OpenAI's shape)."""
    return [{"type": "function", "function": dict(tool)} for tool in tools]


def _arguments(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text


def _native(message: Message) -> Message:
    calls = message.get("tool_calls")
    if not calls:
        return message
    out = dict(message)
    out["tool_calls"] = [
        {
            "id": call.get("id", ""),
            "type": "function",
            "function": {
                "name": call["function"]["name"],
                "arguments": _arguments(call["function"].get("arguments", "{}")),
            },
        }
        for call in calls
    ]
    out.setdefault("content", "")
    return out


def _call_text(call: dict[str, Any]) -> str:
    body = {
        "name": call["function"]["name"],
        "arguments": _arguments(call["function"].get("arguments", "{}")),
    }
    return f"<tool_call>\n{json.dumps(body, ensure_ascii=False)}\n</tool_call>"


def _generic(messages: Sequence[Message], tools: Sequence[dict[str, Any]]) -> list[Message]:
    out: list[Message] = []
    if tools:
        listing = "\n".join(json.dumps(t, ensure_ascii=False) for t in tools)
        out.append({"role": "system", "content": GENERIC_INSTRUCTIONS.format(tools=listing)})
    for message in messages:
        role, content = message["role"], message.get("content") or ""
        if role == "assistant" and message.get("tool_calls"):
            calls = "\n".join(_call_text(c) for c in message["tool_calls"])
            content = f"{content}\n{calls}" if content else calls
        elif role == "tool":
            role = "user"
            content = f"<tool_response>\n{content}\n</tool_response>"
        if out and out[-1]["role"] == role:  # keep turns alternating
            out[-1] = {"role": role, "content": f"{out[-1]['content']}\n\n{content}"}
        else:
            out.append({"role": role, "content": content})
    return out


def _reasoning(message: Message, fmt: ToolFormat) -> Message:
    if "reasoning_content" not in message:
        return message
    out = dict(message)
    reasoning = out.pop("reasoning_content") or ""
    if fmt.channels and reasoning and out["role"] == "assistant":
        content = out.get("content") or ""
        if out.get("tool_calls") and content:  # harmony's template takes one analysis text
            reasoning, out["content"] = f"{reasoning}\n\n{content}", ""
        out["thinking"] = reasoning
    return out


def template_inputs(
    messages: Sequence[Message], tools: Sequence[dict[str, Any]] | None, fmt: ToolFormat
) -> tuple[list[Message], list[dict[str, Any]] | None]:
    """(messages, tools) to pass to the template: native pass-through or the generic format."""
    messages = [_reasoning(m, fmt) for m in messages]
    has_tool_turns = any(m["role"] == "tool" or m.get("tool_calls") for m in messages)
    if fmt.native:
        return [_native(m) for m in messages], (openai_tools(tools) if tools else None)
    if not tools and not has_tool_turns:
        return list(messages), None
    return _generic(messages, tools or ()), None
