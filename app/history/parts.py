"""MessagePart: the pieces of a reply beyond its plain text, stored with the message.

A reply from a reasoning model has its thinking apart from its answer; a reply that used tools
holds each call the model made and each result that went back to it, in the order they happened
(text, call, result, more text...). A user message may carry text files attached to it (`file`:
`name` and the file's `text`). A message whose parts are empty is its `content` alone; a
message with parts keeps `content` as the joined text parts (what is copied and searched).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

PartKind = Literal["reasoning", "text", "tool_call", "tool_result", "file"]
PART_KINDS: tuple[str, ...] = ("reasoning", "text", "tool_call", "tool_result", "file")
ResultStatus = Literal["", "ok", "error", "denied"]
RESULT_STATUSES: tuple[str, ...] = ("ok", "error", "denied")


@dataclass(frozen=True)
class MessagePart:
    """One piece of a reply.

    reasoning / text: `text`. tool_call: `name`, `arguments` (a JSON object as text), `call_id`.
    tool_result: `call_id` of its call, `name`, `text` (what the tool returned, or why it did not
    run), `status` ok | error | denied. file: `name` (the file's name) and `text` (its text).
    """

    kind: PartKind
    text: str = ""
    name: str = ""
    arguments: str = ""
    call_id: str = ""
    status: ResultStatus = ""

    def __post_init__(self) -> None:
        if self.kind not in PART_KINDS:
            raise ValueError(f"part kind {self.kind!r}: must be one of {', '.join(PART_KINDS)}")
        if self.kind in ("tool_call", "tool_result") and not (self.name and self.call_id):
            raise ValueError(f"{self.kind} part: needs a name and a call_id")
        if self.kind == "file" and not self.name:
            raise ValueError("file part: needs the file's name")
        if self.kind == "tool_call":
            try:
                arguments = json.loads(self.arguments or "{}")
            except ValueError:
                raise ValueError(f"tool_call {self.name} arguments: not JSON") from None
            if not isinstance(arguments, dict):
                raise ValueError(f"tool_call {self.name} arguments: not a JSON object")
        if self.kind == "tool_result" and self.status not in RESULT_STATUSES:
            raise ValueError(
                f"tool_result {self.name} status {self.status!r}: one of {RESULT_STATUSES}"
            )
        if self.kind != "tool_result" and self.status:
            raise ValueError(f"{self.kind} part: only tool results have a status")

    def to_json(self) -> dict[str, Any]:
        """The part as stored (only the fields it uses)."""
        out: dict[str, Any] = {"kind": self.kind}
        for key in ("text", "name", "arguments", "call_id", "status"):
            value = getattr(self, key)
            if value:
                out[key] = value
        return out

    @classmethod
    def from_json(cls, value: Any) -> MessagePart:
        """A part from its stored form (ValueError naming the field that is wrong)."""
        if not isinstance(value, Mapping):
            raise ValueError("part: not an object")
        unknown = set(value) - {"kind", "text", "name", "arguments", "call_id", "status"}
        if unknown:
            raise ValueError(f"part: unknown field {sorted(unknown)[0]!r}")
        for key, field_value in value.items():
            if not isinstance(field_value, str):
                raise ValueError(f"part {key}: not text")
        return cls(**dict(value))


def parts_to_json(parts: Iterable[MessagePart]) -> str:
    return json.dumps([p.to_json() for p in parts], ensure_ascii=False)


def parts_from_json(text: str) -> tuple[MessagePart, ...]:
    """Stored parts; ValueError when the column is not a list of valid parts."""
    value = json.loads(text or "[]")
    if not isinstance(value, list):
        raise ValueError("parts: not a list")
    return tuple(MessagePart.from_json(item) for item in value)


def joined_text(parts: Iterable[MessagePart]) -> str:
    """The reply's text: its text parts, in order."""
    return "".join(p.text for p in parts if p.kind == "text")
