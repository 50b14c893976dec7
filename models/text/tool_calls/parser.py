"""Tool calls out of a reply, all at once or incrementally as the text streams.

`ToolCallParser(fmt).feed(delta)` returns what is certain so far: content text (held back only
while it could still be the start of a call marker) and each ToolCall once its closing marker
arrives (or the reply ends, for shapes that run to the end). A call whose body does not parse
is given back as content, so nothing the model wrote is lost. `parse_tool_calls(text, fmt)` is
the same parser over a whole reply.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from typing import Any

from ember.models.text.tool_calls.calls import ToolCall
from ember.models.text.tool_calls.formats import CallShape, ToolFormat

BARE = CallShape("", None)  # llama3: the reply itself is the call


@dataclass(frozen=True)
class ParsedReply:
    """A whole reply split into its content and its tool calls."""

    content: str
    calls: tuple[ToolCall, ...] = ()


def _held(text: str, markers: list[str]) -> int:
    """Length of the longest suffix of text that is a proper prefix of a marker."""
    best = 0
    for marker in markers:
        for length in range(min(len(marker) - 1, len(text)), best, -1):
            if text.endswith(marker[:length]):
                best = length
                break
    return best


def _call_from(obj: Any, fmt: ToolFormat) -> ToolCall | None:
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


def _json_calls(body: str, fmt: ToolFormat) -> list[ToolCall] | None:
    body = body.strip()
    if fmt.name == "mistral" and body and body[0] not in "[{" and "[ARGS]" in body:
        name, _, args = body.partition("[ARGS]")  # newer Mistral: NAME[ARGS]{...}
        body = json.dumps({"name": name.strip(), "arguments": args.strip()})
    try:
        value = json.loads(body)
    except ValueError:
        return None
    items = value if isinstance(value, list) else [value]
    calls = [_call_from(item, fmt) for item in items]
    if not calls or any(c is None for c in calls):
        return None
    return [c for c in calls if c is not None]


def _python_calls(body: str) -> list[ToolCall] | None:
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


@dataclass
class ToolCallParser:
    """Incremental: feed() text deltas, then finish(); each returns [str | ToolCall, ...]."""

    fmt: ToolFormat
    buffer: str = ""
    shape: CallShape | None = None  # inside a call of this shape
    seen_content: bool = False  # non-blank content already went out (no bare-JSON call now)
    calls: list[ToolCall] = field(default_factory=list)

    def feed(self, text: str) -> list[str | ToolCall]:
        self.buffer += text
        out: list[str | ToolCall] = []
        while self._step(out, final=False):
            pass
        return out

    def finish(self) -> list[str | ToolCall]:
        out: list[str | ToolCall] = []
        while self._step(out, final=True):
            pass
        if self.shape is not None:  # the reply ended inside a call: parse what is there
            self._close(self.buffer, out, closed=self.shape.close is None)
            self.buffer = ""
        if self.buffer:
            self._content(self.buffer, out)
            self.buffer = ""
        return out

    # ---- one move of the state machine; True when it made progress and may go on ---------
    def _step(self, out: list[str | ToolCall], final: bool) -> bool:
        if self.shape is None:
            return self._outside(out, final)
        close = self.shape.close
        if close is None:
            return False  # runs to the end of the reply: finish() parses it
        end = self.buffer.find(close)
        if end < 0:
            return False
        body, self.buffer = self.buffer[:end], self.buffer[end + len(close) :]
        self._close(body, out, closed=True)
        return True

    def _outside(self, out: list[str | ToolCall], final: bool) -> bool:
        if self.fmt.bare_json and not self.seen_content:
            stripped = self.buffer.lstrip()
            if stripped.startswith("{"):
                self.shape, self.buffer = BARE, stripped
                return True
            if not stripped and not final:
                return False  # only whitespace so far: wait
        hits = [(self.buffer.find(s.open), s) for s in self.fmt.shapes]
        hits = [(i, s) for i, s in hits if i >= 0]
        if hits:
            start, shape = min(hits, key=lambda hit: hit[0])
            self._content(self.buffer[:start], out)
            self.shape, self.buffer = shape, self.buffer[start + len(shape.open) :]
            return True
        keep = 0 if final else _held(self.buffer, [s.open for s in self.fmt.shapes])
        self._content(self.buffer[: len(self.buffer) - keep], out)
        self.buffer = self.buffer[len(self.buffer) - keep :]
        return False

    def _close(self, body: str, out: list[str | ToolCall], closed: bool) -> None:
        """End a call; closed = its closing marker was seen (or it has none)."""
        shape, self.shape = self.shape, None
        assert shape is not None
        calls = _python_calls(body) if shape.body == "python" else _json_calls(body, self.fmt)
        if calls is None:  # not a call after all: give the text back
            tail = (shape.close or "") if closed else ""
            self._content(shape.open + body + tail, out)
            return
        self.calls += calls
        out.extend(calls)

    def _content(self, text: str, out: list[str | ToolCall]) -> None:
        if not text:
            return
        self.seen_content = self.seen_content or bool(text.strip())
        if out and isinstance(out[-1], str):
            out[-1] += text
        else:
            out.append(text)


def parse_tool_calls(text: str, fmt: ToolFormat) -> ParsedReply:
    """A whole reply's content and tool calls."""
    parser = ToolCallParser(fmt)
    parts = parser.feed(text) + parser.finish()
    content = "".join(p for p in parts if isinstance(p, str))
    return ParsedReply(content, tuple(p for p in parts if isinstance(p, ToolCall)))
