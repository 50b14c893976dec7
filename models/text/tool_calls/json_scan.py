"""An incremental JSON scan of a tool call's body: where each call's name and arguments are.

`JsonCallScan(keys).feed(text)` reads the body one character at a time, so it can be cut
anywhere and resumed, and checks the JSON syntax as it goes. For each call object (the body
itself, or each item of a body that is a list) it records the decoded "name" string and the
span [args_start, args_end) of the arguments value, when that value is an object, so the
arguments can be sent while they are still being written. With `name` given (Mistral's
NAME[ARGS]{...}) the body's one value is the arguments. The scan stops at the end of the body's
value (`done`) or at the first character that breaks the syntax (`error`); `pos` is the next
character to read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

WHITESPACE = " \t\n\r"
SCALAR = set("-+.0123456789eEtrufalsn")
ESCAPES = set('"\\/bfnrtu')
MAX_DEPTH = 256


@dataclass
class CallSpan:
    """One call object in the body text (offsets into the scanned text)."""

    start: int
    name: str | None = None
    args_start: int | None = None  # the arguments value starts here with "{"
    args_end: int | None = None  # one past its closing "}"
    end: int | None = None  # one past the call object's closing "}"


@dataclass
class _Frame:
    kind: str  # "{", "[" or "" (the body itself)
    state: str  # "{": key0 key colon value next; "[": value0 value next; "": value end
    call: CallSpan | None = None  # this object is a call object
    key: str | None = None  # a call object's key whose value comes next
    is_args: bool = False  # this object is its parent call's arguments value


class JsonCallScan:
    """Resumable JSON syntax check of a call body; see the module docstring."""

    def __init__(self, arg_keys: tuple[str, ...], name: str | None = None) -> None:
        self.arg_keys = arg_keys
        self.name = name
        self.text = ""
        self.pos = 0
        self.error: int | None = None
        self.done = False
        self.calls: list[CallSpan] = []
        self.stack = [_Frame("", "value")]
        self.lexeme: str | None = None  # "string" | "scalar" while inside one
        self.lexeme_start = 0
        self.role: str | None = None  # what the string being read is: "key" | "name"
        self.escape = False

    @property
    def in_string(self) -> bool:
        return self.lexeme == "string" and self.error is None and not self.done

    @property
    def stopped(self) -> bool:
        return self.done or self.error is not None

    def feed(self, text: str) -> None:
        self.text += text
        while self.pos < len(self.text) and not self.stopped:
            if not self._char(self.pos, self.text[self.pos]):
                self.error = self.pos
                return
            self.pos += 1

    # ---- one character; False when it breaks the syntax --------------------------------
    def _char(self, i: int, ch: str) -> bool:
        if self.lexeme == "string":
            return self._string_char(i, ch)
        if self.lexeme == "scalar":
            if ch in SCALAR:
                return True
            self.lexeme = None
            try:
                json.loads(self.text[self.lexeme_start : i])
            except ValueError:
                return False
            self._value_end(i)
            if self.done:  # the character after the value is not the body's
                return True
        if ch in WHITESPACE:
            return True
        frame = self.stack[-1]
        if frame.state in ("value", "value0"):
            if ch == "]" and frame.state == "value0":
                return self._close(i)
            return self._value_start(i, ch, frame)
        if frame.state in ("key0", "key"):
            if ch == "}" and frame.state == "key0":
                return self._close(i)
            if ch != '"':
                return False
            self._begin_string(i, "key")
            return True
        if frame.state == "colon":
            frame.state = "value"
            return ch == ":"
        if frame.state == "next":
            if ch == ",":
                frame.state = "key" if frame.kind == "{" else "value"
                return True
            closer = {"{": "}", "[": "]"}.get(frame.kind)
            return ch == closer and self._close(i)
        return False  # state "end": only whitespace may follow the body's value

    def _string_char(self, i: int, ch: str) -> bool:
        if self.escape:
            self.escape = False
            return ch in ESCAPES
        if ch == "\\":
            self.escape = True
        elif ord(ch) < 0x20:
            return False
        elif ch == '"':
            self.lexeme = None
            return self._string_end(i)
        return True

    def _begin_string(self, i: int, role: str | None) -> None:
        self.lexeme, self.lexeme_start, self.role = "string", i, role

    def _string_end(self, i: int) -> bool:
        frame, role = self.stack[-1], self.role
        if role is not None:  # a call object's key or name: decode it
            try:
                value = json.loads(self.text[self.lexeme_start : i + 1])
            except ValueError:
                return False
            if role == "key":
                frame.key, frame.state = value, "colon"
                return True
            if frame.call is not None and value and frame.call.name is None:
                frame.call.name = value
        self._value_end(i + 1)
        return True

    def _value_start(self, i: int, ch: str, frame: _Frame) -> bool:
        call, key = frame.call, frame.key
        if ch in "{[":
            if len(self.stack) > MAX_DEPTH:
                return False
            child = _Frame(ch, "key0" if ch == "{" else "value0")
            if ch == "{" and self._is_call_level():
                child.call = CallSpan(i)
                self.calls.append(child.call)
                if self.name is not None:  # the body is the arguments of a named call
                    child.call.name, child.call.args_start, child.is_args = self.name, i, True
            elif ch == "{" and call is not None and key in self.arg_keys:
                if call.args_start is None:
                    call.args_start, child.is_args = i, True
            self.stack.append(child)
            return True
        if ch == '"':
            named = call is not None and key == "name" and self.name is None
            self._begin_string(i, "name" if named else None)
            return True
        if ch in SCALAR:
            self.lexeme, self.lexeme_start = "scalar", i
            return True
        return False

    def _is_call_level(self) -> bool:
        if len(self.stack) == 1:
            return True
        return self.name is None and len(self.stack) == 2 and self.stack[1].kind == "["

    def _close(self, i: int) -> bool:
        frame = self.stack.pop()
        if frame.is_args:
            owner = frame.call if frame.call is not None else self.stack[-1].call
            if owner is not None:
                owner.args_end = i + 1
        if frame.call is not None:
            frame.call.end = i + 1
        self._value_end(i + 1)
        return True

    def _value_end(self, end: int) -> None:
        frame = self.stack[-1]
        if frame.kind == "":
            frame.state, self.done = "end", True
            self.pos = end - 1  # feed() steps past the last character of the value
            return
        frame.state = "next"
        frame.key = None if frame.kind == "{" else frame.key
