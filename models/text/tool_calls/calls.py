"""ToolCall: one function call parsed from a reply (OpenAI's shape: arguments as JSON text)."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any


def new_call_id() -> str:
    """An id in OpenAI's style: call_ + 24 hex digits."""
    return "call_" + uuid.uuid4().hex[:24]


@dataclass(frozen=True)
class ToolCall:
    """A call of the function `name` with `arguments` (a JSON object as text)."""

    name: str
    arguments: str = "{}"
    id: str = field(default_factory=new_call_id)

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("tool call: the function name is empty")

    @property
    def arguments_dict(self) -> dict[str, Any]:
        """The arguments parsed ({} when they are not a JSON object)."""
        try:
            value = json.loads(self.arguments)
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}

    def to_openai(self) -> dict[str, Any]:
        """The `tool_calls[i]` object of an OpenAI chat message."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(frozen=True)
class CallStart:
    """A call's name is known: call `index` (0-based in the reply) with `id` has begun."""

    index: int
    id: str
    name: str


@dataclass(frozen=True)
class ArgsDelta:
    """More of call `index`'s arguments text; a call's deltas concatenate to its arguments."""

    index: int
    text: str
