"""The strings a client writes into a chat template's inputs besides message content, and how
segments.py marks them so they are tokenized as text, never as control tokens.

Besides message content a client (an API request, an MCP server's tool list, a model's earlier
tool calls sent back as history) writes: template kwargs (every string in them), tools
(everything under each tool's `function`: name, description, the parameters' JSON Schema), an
assistant message's tool calls (id, function name, the arguments) and a tool message's
`tool_call_id` and `name`. Values are wrapped in the marker pair like message content; a template
that dumps them with `tojson` keeps the markers inside the JSON strings (non-ASCII stays as it
is), so the marked spans are exactly the client's text, JSON-escaped. Dict keys are names that
templates look up (`properties`, `type`), so a key is marked only when it spells a special
token itself (no template looks up a property named `<|im_end|>`).

Ember's own structure is not marked: a tool's and a call's `"type": "function"`, the roles.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ember.models.errors import TemplateError

Messages = list[dict[str, Any]]
Kwargs = dict[str, Any]


def wrap(text: str, open_: str, close: str, keep_whitespace_outside: bool) -> str:
    """text between the markers (its outer whitespace left outside them, for templates that
    trim); whitespace alone stays unmarked (it cannot spell a special token)."""
    if not keep_whitespace_outside:
        return f"{open_}{text}{close}"
    core = text.strip()
    if not core:
        return text
    start = text.index(core)
    return f"{text[:start]}{open_}{core}{close}{text[start + len(core) :]}"


@dataclass(frozen=True)
class Marking:
    """How one marked render wraps client strings outside message content."""

    open_: str
    close: str
    outside: bool  # outer whitespace outside the markers
    every_value: bool  # every client string, or only the risky ones
    risky: frozenset[str]  # the client strings (values or keys) that spell a special token

    def text(self, value: str) -> str:
        if self.every_value or value in self.risky:
            return wrap(value, self.open_, self.close, self.outside)
        return value

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.key(k): self.value(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.value(v) for v in value]
        return value

    def key(self, key: Any) -> Any:
        if isinstance(key, str) and key in self.risky:
            return wrap(key, self.open_, self.close, False)
        return key

    def kwargs(self, kwargs: Kwargs) -> Kwargs:
        return {k: self.tools(v) if k == "tools" else self.value(v) for k, v in kwargs.items()}

    def tools(self, tools: Any) -> Any:
        if not isinstance(tools, list):
            return self.value(tools)
        return [self._function_of(tool) for tool in tools]

    def message_fields(self, message: dict[str, Any]) -> dict[str, Any]:
        """The message with its tool calls, tool_call_id and name marked (content apart)."""
        out = dict(message)
        for field in ("tool_call_id", "name"):
            if isinstance(out.get(field), str):
                out[field] = self.text(out[field])
        calls = out.get("tool_calls")
        if isinstance(calls, list):
            out["tool_calls"] = [self._function_of(call, mark_id=True) for call in calls]
        return out

    def _function_of(self, item: Any, mark_id: bool = False) -> Any:
        """{"type": "function", "function": {...}, "id": ...}: the function (and id) marked."""
        if not isinstance(item, dict) or not isinstance(item.get("function"), dict):
            return self.value(item)
        out = {**item, "function": self.value(item["function"])}
        if mark_id and isinstance(out.get("id"), str):
            out["id"] = self.text(out["id"])
        return out


def _strings_and_keys(value: Any, out: list[str]) -> None:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict):
            out += [k for k in item if isinstance(k, str)]
            stack += list(item.values())
        elif isinstance(item, list | tuple):
            stack += list(item)


def client_strings(messages: Messages, kwargs: Kwargs, max_chars: int) -> list[str]:
    """Every client string outside message content: kwargs' values and nested keys, tool-call
    fields, tool_call_id and name. More than max_chars of them in all is refused before any is
    tokenized (a huge tool description unused by the template would otherwise be read whole)."""
    out: list[str] = []
    for value in kwargs.values():
        _strings_and_keys(value, out)
    for message in messages:
        fields = {k: message[k] for k in ("tool_calls", "tool_call_id", "name") if k in message}
        _strings_and_keys(fields, out)
    total = sum(len(s) for s in out)
    if total > max_chars:
        raise TemplateError(
            f"tools, tool calls and template kwargs hold {total} characters of text; "
            f"at most {max_chars} fit a chat template's output"
        )
    return out


def spelling_special(
    strings: list[str], spells_special: Callable[[str], bool] | None
) -> frozenset[str]:
    """The strings that spell a special token (all of them tokenized once, joined, first:
    strings without any are the common case)."""
    if spells_special is None or not strings or not spells_special("\n".join(strings)):
        return frozenset()
    return frozenset(s for s in set(strings) if spells_special(s))
