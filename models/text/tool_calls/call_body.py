"""One call body (the text after a call's opening marker), read as it streams.

A JSON body goes through JsonCallScan. A call starts (CallStart) once its name is known and its
arguments object has begun; the arguments then go out as ArgsDelta fragments exactly as the
model writes them, and the ToolCall at the object's end carries the same text, so the fragments
concatenate to its `arguments`. A call object that cannot stream (arguments written as a JSON
string, no arguments) becomes one ToolCall when it closes. A body that makes no call (not JSON,
its first item not a call, Gemma's Python lines) is judged whole at its end, as before: calls,
or its text given back as content. After a call, text that is not part of one (a syntax error,
a non-call item) is given back as content.
"""

from __future__ import annotations

import re

from ember.models.text.tool_calls.calls import ArgsDelta, CallStart, ToolCall, new_call_id
from ember.models.text.tool_calls.formats import CallShape, ToolFormat
from ember.models.text.tool_calls.json_scan import JsonCallScan
from ember.models.text.tool_calls.whole_body import json_calls, object_call, python_calls

Part = str | ToolCall | CallStart | ArgsDelta
ARGS_MARK = "[ARGS]"  # Mistral's NAME[ARGS]{...}
NAME = re.compile(r"[A-Za-z_][\w.\-]*\Z")
MAX_NAME = 256


class CallBody:
    """The body of one call shape; feed() its text, then end() at its close or the reply's."""

    def __init__(self, shape: CallShape, fmt: ToolFormat, first_index: int) -> None:
        self.shape, self.fmt = shape, fmt
        self.index = first_index  # the next call's index in the reply
        self.raw = ""  # all the body text fed
        self.head = ""  # text before the scan starts (a Mistral name)
        self.mode = "raw" if shape.body == "python" else "undecided"  # | "json"
        self.scan: JsonCallScan | None = None
        self.keys = tuple(dict.fromkeys((fmt.arguments_key, "arguments", "parameters")))
        self.calls: list[ToolCall] = []
        self.failed = False  # its first item is not a call: judged whole at the end
        self.span = 0  # scan.calls[span] is the call object being read
        self.started: CallStart | None = None
        self.sent = 0  # scan.text up to here went out as the started call's arguments
        self.accounted = 0  # scan.text up to here went into calls

    @property
    def in_string(self) -> bool:
        return self.scan is not None and self.scan.in_string

    @property
    def finished(self) -> bool:
        """The body made calls and its JSON ended (or broke): the rest is not the body's."""
        scan = self.scan
        return scan is not None and bool(self.calls) and scan.stopped and self.started is None

    def feed(self, text: str) -> list[Part]:
        self.raw += text
        out: list[Part] = []
        if self.mode == "undecided":
            self.head += text
            text = self._decide()
        if self.scan is not None and not self.failed:
            self.scan.feed(text)
            self._advance(out)
        return out

    def _decide(self) -> str:
        """Start the scan once the body's first character says how; the text it starts with."""
        stripped = self.head.lstrip()
        if not stripped:
            return ""
        name = None
        if self.fmt.name == "mistral" and stripped[0] not in "[{":
            mark = self.head.find(ARGS_MARK)
            if mark < 0:
                self.mode = "raw" if len(self.head) > MAX_NAME else self.mode
                return ""
            name = self.head[:mark].strip()
            if not NAME.match(name):
                self.mode = "raw"
                return ""
            self.head = self.head[mark + len(ARGS_MARK) :]
        self.mode, self.scan = "json", JsonCallScan(self.keys, name)
        return self.head

    def _advance(self, out: list[Part]) -> None:
        scan = self.scan
        assert scan is not None
        while self.span < len(scan.calls) and not self.failed:
            span = scan.calls[self.span]
            if self.started is None:
                if span.name is not None and span.args_start is not None:
                    self.started = CallStart(self.index, new_call_id(), span.name)
                    out.append(self.started)
                    self.sent = span.args_start
                elif span.end is not None:  # closed without streaming: judge the object
                    self._whole_object(span.start, span.end, out)
                    continue
                else:
                    break
            upto = span.args_end if span.args_end is not None else scan.pos
            if upto > self.sent:
                out.append(ArgsDelta(self.index, scan.text[self.sent : upto]))
                self.sent = upto
            if span.end is None:
                break
            self._complete(span.end, out)
        if scan.error is not None and self.started is not None:
            self._complete(self.sent, out)  # the JSON broke: the call ends where it did

    def _whole_object(self, start: int, end: int, out: list[Part]) -> None:
        assert self.scan is not None
        self.span += 1
        call = object_call(self.scan.text[start:end], self.fmt)
        if call is not None:
            self._made(call, end, out)
        elif not self.calls:
            self.failed = True
        else:
            self._give_back(end, out)

    def _complete(self, end: int, out: list[Part]) -> None:
        assert self.scan is not None and self.started is not None
        span = self.scan.calls[self.span]
        args = self.scan.text[span.args_start : self.sent]
        self._made(ToolCall(self.started.name, args, self.started.id), end, out)
        self.started = None
        self.span += 1

    def _made(self, call: ToolCall, end: int, out: list[Part]) -> None:
        self.calls.append(call)
        out.append(call)
        self.index += 1
        self.accounted = end

    def _give_back(self, end: int, out: list[Part]) -> None:
        assert self.scan is not None
        text = self.scan.text[self.accounted : end]
        if text.strip():
            out.append(text)
        self.accounted = max(self.accounted, end)

    def rest(self, out: list[Part]) -> str:
        """When finished: text after the body's JSON, handed back to the parser as reply text;
        text that broke the JSON goes to out as content."""
        scan = self.scan
        assert scan is not None
        if scan.done:
            return scan.text[scan.pos :]
        self._give_back(len(scan.text), out)
        return ""

    def end(self, marker: bool, out: list[Part]) -> ToolCall | None:
        """The body's close marker came (marker) or the reply ended: the calls left, or the
        body's text as content. Returns the call the reply's end cut inside its arguments."""
        cut = None
        if self.started is not None:
            assert self.scan is not None
            span = self.scan.calls[self.span]
            whole = span.args_end is not None
            self._complete(self.sent, out)  # sent: args_end once the arguments ended
            cut = None if whole or marker else self.calls[-1]
        if self.calls:
            leftover = self.rest(out)
            if leftover.strip():
                out.append(leftover)
            return cut
        body = self.raw
        calls = python_calls(body) if self.shape.body == "python" else json_calls(body, self.fmt)
        if calls is None:  # not a call after all: give the text back
            tail = (self.shape.close or "") if marker else ""
            out.append(self.shape.open + body + tail)
            return None
        self.calls += calls
        out.extend(calls)
        return None
