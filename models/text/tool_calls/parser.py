"""Tool calls out of a reply, all at once or incrementally as the text streams.

`ToolCallParser(fmt).feed(delta)` returns what is certain so far, in order: content text (held
back only while it could still be the start of a call marker) and, for each call, a CallStart
once its name is known, ArgsDelta fragments of its arguments as they are written, and the
ToolCall when it ends (call_body.py: which calls stream and which come whole). A call marker
inside a JSON string of a call does not end it. A body that is not a call is given back as
content, so nothing the model wrote is lost. `parse_tool_calls(text, fmt)` is the same parser
over a whole reply, so a streamed reply and a whole one get the same calls and arguments.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ember.models.text.tool_calls.call_body import CallBody, Part
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


@dataclass
class ToolCallParser:
    """Incremental: feed() text deltas, then finish(); each returns [str | call event, ...]."""

    fmt: ToolFormat
    buffer: str = ""
    body: CallBody | None = None  # inside a call shape
    seen_content: bool = False  # non-blank content already went out (no bare-JSON call now)
    calls: list[ToolCall] = field(default_factory=list)
    cut: tuple[ToolCall, str] | None = None  # the call the reply's end cut, and its text

    def feed(self, text: str) -> list[Part]:
        self.buffer += text
        out: list[Part] = []
        while self._step(out, final=False):
            pass
        return out

    def finish(self) -> list[Part]:
        out: list[Part] = []
        while self._step(out, final=True):
            pass
        if self.body is not None:  # the reply ended inside a call
            self._end(out, marker=False)
        if self.buffer:
            self._content(self.buffer, out)
            self.buffer = ""
        return out

    # ---- one move of the state machine; True when it made progress and may go on ---------
    def _step(self, out: list[Part], final: bool) -> bool:
        body = self.body
        if body is None:
            return self._outside(out, final)
        close = body.shape.close
        if close is None:  # runs to the end of its JSON (or of the reply)
            self._feed_body(self.buffer, out)
            self.buffer = ""
            if not body.finished:
                return False
            parts: list[Part] = []
            self.buffer = body.rest(parts)
            self._emit(parts, out)
            self.body = None
            return True
        while (end := self.buffer.find(close)) >= 0:
            head, self.buffer = self.buffer[:end], self.buffer[end + len(close) :]
            self._feed_body(head, out)
            if not body.in_string:
                self._end(out, marker=True)
                return True
            self._feed_body(close, out)  # the marker is text inside a JSON string
        keep = 0 if final else _held(self.buffer, [close])
        self._feed_body(self.buffer[: len(self.buffer) - keep], out)
        self.buffer = self.buffer[len(self.buffer) - keep :]
        return False

    def _outside(self, out: list[Part], final: bool) -> bool:
        if self.fmt.bare_json and not self.seen_content:
            stripped = self.buffer.lstrip()
            if stripped.startswith("{"):
                self.body, self.buffer = CallBody(BARE, self.fmt, len(self.calls)), stripped
                return True
            if not stripped and not final:
                return False  # only whitespace so far: wait
        hits = [(self.buffer.find(s.open), s) for s in self.fmt.shapes]
        hits = [(i, s) for i, s in hits if i >= 0]
        if hits:
            start, shape = min(hits, key=lambda hit: hit[0])
            self._content(self.buffer[:start], out)
            self.buffer = self.buffer[start + len(shape.open) :]
            self.body = CallBody(shape, self.fmt, len(self.calls))
            return True
        keep = 0 if final else _held(self.buffer, [s.open for s in self.fmt.shapes])
        self._content(self.buffer[: len(self.buffer) - keep], out)
        self.buffer = self.buffer[len(self.buffer) - keep :]
        return False

    def _feed_body(self, text: str, out: list[Part]) -> None:
        if text and self.body is not None:
            self._emit(self.body.feed(text), out)

    def _end(self, out: list[Part], marker: bool) -> None:
        """End the call shape; marker = its closing marker was seen."""
        body, self.body = self.body, None
        assert body is not None
        parts: list[Part] = []
        cut = body.end(marker, parts)
        if cut is not None:
            self.cut = (cut, body.shape.open + body.raw)
        self._emit(parts, out)

    def _emit(self, parts: list[Part], out: list[Part]) -> None:
        for part in parts:
            if isinstance(part, str):
                self._content(part, out)
                continue
            if isinstance(part, ToolCall):
                self.calls.append(part)
            out.append(part)

    def _content(self, text: str, out: list[Part]) -> None:
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
