"""A harmony reply (gpt-oss) read as it streams: reasoning, content and tool calls apart.

The model writes messages, each a header and a body:

    <|channel|>analysis<|message|>...<|end|>                      reasoning
    <|start|>assistant<|channel|>final<|message|>...<|return|>    the answer
    <|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{..}<|call|>

The prompt ends with `<|start|>assistant`, so the reply begins with its first header. A body
ends at `<|end|>`, `<|call|>`, `<|return|>` (the last two end generation: the engine stops on
them and they never reach the text) or a `<|start|>` the model wrote without an `<|end|>`.

Channels: analysis -> reasoning; final, and commentary without a recipient (a preamble the
user may see) -> content; commentary `to=functions.NAME` (the recipient may also stand in the
header before the channel) -> a tool call: CallStart when the header ends, ArgsDelta as the
body streams, the ToolCall at its end, its arguments exactly the deltas joined. A call whose
arguments are not finished JSON when the reply ends is `cut` (a length limit stopped it). When
tools are not parsed, a call's header and body stay content, as the other formats' markup does.

Text that cannot be a header (a newline, more than MAX_HEADER_CHARS, or a start that is not
one) is content, so a model that does not write harmony loses nothing.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from ember.models.text.tool_calls.calls import ArgsDelta, CallStart, ToolCall, new_call_id

CallEvent = CallStart | ArgsDelta | ToolCall
MESSAGE, START = "<|message|>", "<|start|>"
ENDS = ("<|end|>", "<|call|>", "<|return|>", START)
# what a header can begin with once a leading <|start|> is dropped
HEADER_STARTS = ("<|channel|>", "assistant", "to=", "<|constrain|>")
MAX_HEADER_CHARS = 256
_CHANNEL = re.compile(r"<\|channel\|>\s*([^\s<]+)")
_RECIPIENT = re.compile(r"\bto=([^\s<]+)")


def _held(text: str, markers: tuple[str, ...]) -> int:
    """Length of the longest suffix of text that is a proper prefix of a marker."""
    best = 0
    for marker in markers:
        for length in range(min(len(marker) - 1, len(text)), best, -1):
            if text.endswith(marker[:length]):
                best = length
                break
    return best


@dataclass(frozen=True)
class Header:
    """What a message header says: its channel and recipient ("" when absent)."""

    channel: str = ""
    recipient: str = ""
    raw: str = ""  # the header as written (for a call given back as text)

    @classmethod
    def parse(cls, text: str) -> Header:
        channel = _CHANNEL.search(text)
        recipient = _RECIPIENT.search(text)
        return cls(
            channel.group(1) if channel else "", recipient.group(1) if recipient else "", text
        )

    @property
    def function(self) -> str:
        """The function a commentary message calls ("" when it calls none)."""
        if self.channel != "commentary" or not self.recipient:
            return ""
        return self.recipient.removeprefix("functions.")


def _header_so_far(text: str) -> bool:
    """Whether text may still grow into a message header."""
    if "\n" in text or len(text) > MAX_HEADER_CHARS:
        return False
    head = text.lstrip(" ")
    if START.startswith(head):  # empty, or a <|start|> not yet whole
        return True
    head = head.removeprefix(START).lstrip(" ")
    return not head or any(p.startswith(head) or head.startswith(p) for p in HEADER_STARTS)


@dataclass
class _Out:
    reasoning: list[str] = field(default_factory=list)
    content: list[str] = field(default_factory=list)
    events: list[CallEvent] = field(default_factory=list)

    def parts(self) -> tuple[str, str, list[CallEvent]]:
        return "".join(self.reasoning), "".join(self.content), self.events


@dataclass
class _Call:
    start: CallStart
    header: Header
    sent: str = ""  # arguments already out as ArgsDelta
    held: str = ""  # whitespace not yet sent (a call's arguments never end in it)
    begun: bool = False  # leading whitespace skipped


@dataclass
class HarmonyReply:
    """Incremental: feed() text deltas, then finish(); each returns (reasoning, content, call
    events in order)."""

    parse_tools: bool = True
    buffer: str = ""
    header: Header | None = None  # the open message's header; None while reading one
    call: _Call | None = None  # the open message is this tool call
    calls: list[ToolCall] = field(default_factory=list)
    cut: tuple[ToolCall, str] | None = None  # a call the reply's end cut short, and its text

    @property
    def inside(self) -> bool:
        """The reply is in an analysis (reasoning) message."""
        return self.header is not None and self.header.channel == "analysis"

    def feed(self, text: str) -> tuple[str, str, list[CallEvent]]:
        self.buffer += text
        out = _Out()
        while self._step(out, final=False):
            pass
        return out.parts()

    def finish(self) -> tuple[str, str, list[CallEvent]]:
        out = _Out()
        while self._step(out, final=True):
            pass
        if self.header is not None:
            self._close(out, marker=False)
        return out.parts()

    # ---- one move; True when it made progress and may go on ----------------------------------
    def _step(self, out: _Out, final: bool) -> bool:
        if self.header is None:
            return self._read_header(out, final)
        hits = [(i, m) for m in ENDS if (i := self.buffer.find(m)) >= 0]
        if hits:
            at, marker = min(hits)
            self._body(self.buffer[:at], out)
            self.buffer = self.buffer[at + (0 if marker == START else len(marker)) :]
            self._close(out, marker=True)
            return True
        keep = 0 if final else _held(self.buffer, ENDS)
        self._body(self.buffer[: len(self.buffer) - keep], out)
        self.buffer = self.buffer[len(self.buffer) - keep :]
        return False

    def _read_header(self, out: _Out, final: bool) -> bool:
        at = self.buffer.find(MESSAGE)
        if at >= 0 and _header_so_far(self.buffer[:at]):
            self._open(Header.parse(self.buffer[:at]), out)
            self.buffer = self.buffer[at + len(MESSAGE) :]
            return True
        if not self.buffer or (not final and _header_so_far(self.buffer)):
            return False  # wait for the rest of the header
        if final and not self.buffer.strip():
            self.buffer = ""
            return False
        self.header = Header()  # not a header: plain text, read as content to the next marker
        return True

    def _open(self, header: Header, out: _Out) -> None:
        self.header = header
        if not header.function:
            return
        if not self.parse_tools:  # the call stays text
            out.content.append(header.raw + MESSAGE)
            return
        start = CallStart(len(self.calls), new_call_id(), header.function)
        self.call = _Call(start, header)
        out.events.append(start)

    def _body(self, text: str, out: _Out) -> None:
        if not text:
            return
        call = self.call
        if call is None:
            (out.reasoning if self.inside else out.content).append(text)
            return
        if not call.begun:
            text = text.lstrip()
            call.begun = bool(text)
        text = call.held + text
        kept = text.rstrip()
        call.held = text[len(kept) :]
        if kept:
            call.sent += kept
            out.events.append(ArgsDelta(call.start.index, kept))

    def _close(self, out: _Out, marker: bool) -> None:
        """The open message ended: at a marker, or with the reply."""
        call, self.header, self.call = self.call, None, None
        if call is None:
            return
        if not call.sent:  # a call without arguments
            call.sent = "{}"
            out.events.append(ArgsDelta(call.start.index, "{}"))
        made = ToolCall(call.start.name, call.sent, call.start.id)
        self.calls.append(made)
        out.events.append(made)
        if not marker and not _finished_json(call.sent):
            self.cut = (made, call.header.raw + MESSAGE + call.sent)


def _finished_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True
