"""Tool-call arguments as they stream: CallStart, ArgsDelta fragments, the ToolCall at the end.

However the reply is cut into deltas, the parser gives the same content and calls, and each
streamed call's fragments concatenate to exactly its `arguments` (the whole reply's too).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ember.models.text.tool_calls import (
    FORMATS,
    ArgsDelta,
    CallStart,
    ToolCall,
    ToolCallParser,
    parse_tool_calls,
)
from tests.fuzz import FUZZ, nasty_text

HERMES, LLAMA3, MISTRAL, GENERIC = (FORMATS[n] for n in ("hermes", "llama3", "mistral", "generic"))


@dataclass
class Streamed:
    content: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    starts: list[CallStart] = field(default_factory=list)
    fragments: dict[int, list[str]] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)  # "start i", "args i", "call i"


def stream(fmt, chunks: list[str]) -> tuple[Streamed, ToolCallParser]:
    parser, got = ToolCallParser(fmt), Streamed()
    parts = [p for chunk in chunks for p in parser.feed(chunk)] + parser.finish()
    for part in parts:
        if isinstance(part, str):
            got.content += part
        elif isinstance(part, CallStart):
            got.starts.append(part)
            got.order.append(f"start {part.index}")
        elif isinstance(part, ArgsDelta):
            got.fragments.setdefault(part.index, []).append(part.text)
            got.order.append(f"args {part.index}")
        else:
            got.order.append(f"call {len(got.calls)}")
            got.calls.append(part)
    return got, parser


def cut(text: str, points: list[int]) -> list[str]:
    bounds = sorted({0, len(text), *(p % (len(text) + 1) for p in points)})
    return [text[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def check_streamed(got: Streamed, streamed: set[int]) -> None:
    """Streamed calls: start, then fragments, then the call; fragments == arguments."""
    assert {s.index for s in got.starts} == streamed
    for start in got.starts:
        call = got.calls[start.index]
        assert (call.id, call.name) == (start.id, start.name)
        assert "".join(got.fragments.get(start.index, [])) == call.arguments
        i = start.index
        events = [e for e in got.order if e.endswith(f" {i}")]
        assert events[0] == f"start {i}" and events[-1] == f"call {i}"


REPLIES = [  # (format, reply, content, [(name, arguments text)], indexes of streamed calls)
    (
        HERMES,
        'Sure.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "n": [1, 2]}}\n</tool_call>',
        "Sure.\n",
        [("get_weather", '{"city": "Paris", "n": [1, 2]}')],
        {0},
    ),
    (
        HERMES,
        '<tool_call>{"name": "a", "arguments": {}}</tool_call><tool_call>{"name": "b", "arguments": "{\\"x\\": 1}"}</tool_call>',
        "",
        [("a", "{}"), ("b", '{"x": 1}')],
        {0},  # b's arguments are a JSON string: it comes whole
    ),
    (
        HERMES,
        '<tool_call>{"name": "say", "arguments": {"text": "a </tool_call> in a string"}}</tool_call> ok',
        " ok",
        [("say", '{"text": "a </tool_call> in a string"}')],
        {0},
    ),
    (
        HERMES,
        '<tool_call>{"arguments": {"q": 1}, "name": "late"}</tool_call>',
        "",
        [("late", '{"q": 1}')],
        {0},  # the name after the arguments: started once it is known
    ),
    (LLAMA3, '  {"name": "get_weather", "parameters": {"city": "Oslo"}}', "", [("get_weather", '{"city": "Oslo"}')], {0}),
    (LLAMA3, '<|python_tag|>{"name": "f", "parameters": {"x": true}}', "", [("f", '{"x": true}')], {0}),
    (LLAMA3, 'The JSON is {"a": 1}', 'The JSON is {"a": 1}', [], set()),
    (LLAMA3, '{"a": 1} is JSON', '{"a": 1} is JSON', [], set()),
    (
        MISTRAL,
        '[TOOL_CALLS][{"name": "f", "arguments": {"q": "x"}}, {"name": "g", "arguments": {}}]',
        "",
        [("f", '{"q": "x"}'), ("g", "{}")],
        {0, 1},
    ),
    (
        MISTRAL,
        '[TOOL_CALLS]f[ARGS]{"q": "y"}[TOOL_CALLS]g[ARGS]{}',
        "",
        [("f", '{"q": "y"}'), ("g", "{}")],
        {0, 1},
    ),
    (
        GENERIC,
        '<tool_call>\n[{"name": "f", "arguments": {"n": 2}}]\n</tool_call>',
        "",
        [("f", '{"n": 2}')],
        {0},
    ),  # SmolLM2
    (
        GENERIC,
        'Let me look.\n```tool_code\nget_weather(city="Rome", unit="c")\n```',
        "Let me look.\n",
        [("get_weather", '{"city": "Rome", "unit": "c"}')],
        set(),  # Gemma's Python call: parsed when its block closes
    ),
    (GENERIC, '<tool_call>{"name": "f"}</tool_call>', "", [("f", "{}")], set()),
    (GENERIC, "<tool_call>not json</tool_call> ok", "<tool_call>not json</tool_call> ok", [], set()),
    (HERMES, "plain answer", "plain answer", [], set()),
]  # fmt: skip


@pytest.mark.parametrize(("fmt", "reply", "content", "calls", "streamed"), REPLIES)
def test_each_format_char_by_char(fmt, reply, content, calls, streamed) -> None:
    got, parser = stream(fmt, list(reply))
    late = next((i for i, (name, _) in enumerate(calls) if name == "late"), -1)  # one piece
    assert got.content == content
    assert [(c.name, c.arguments) for c in got.calls] == calls
    check_streamed(got, streamed)
    for i in streamed - {late}:  # one character at a time: the arguments arrive in pieces
        assert len(got.fragments[i]) > 1
    whole = parse_tool_calls(reply, fmt)
    assert (whole.content, [(c.name, c.arguments) for c in whole.calls]) == (content, calls)
    assert parser.cut is None


@FUZZ
@given(st.integers(0, len(REPLIES) - 1), st.lists(st.integers(0, 400), max_size=12))
def test_any_split_gives_the_same_calls_and_fragments(case: int, points: list[int]) -> None:
    fmt, reply, content, calls, streamed = REPLIES[case]
    got, _ = stream(fmt, cut(reply, points))
    assert got.content == content
    assert [(c.name, c.arguments) for c in got.calls] == calls
    check_streamed(got, streamed)


markers = st.sampled_from(["</tool_call>", "<tool_call>", "[TOOL_CALLS]", "[ARGS]", "```", "}"])
strings = nasty_text | markers | st.lists(markers | nasty_text, max_size=3).map("".join)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | strings,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(strings, inner, max_size=3),
    max_leaves=8,
)


@FUZZ
@given(
    st.dictionaries(strings, json_values, max_size=4),
    st.sampled_from(["hermes", "llama3", "mistral", "generic"]),
    st.booleans(),
    st.lists(st.integers(0, 2000), max_size=16),
)
def test_any_arguments_stream_exactly(args, name, ascii_only, points) -> None:
    fmt = FORMATS[name]
    text = json.dumps(args, ensure_ascii=ascii_only)
    key = fmt.arguments_key
    call = json.dumps({"name": "tool", key: args}, ensure_ascii=ascii_only)  # args as `text`
    reply = {
        "hermes": f"Calling.\n<tool_call>\n{call}\n</tool_call>",
        "llama3": call,
        "mistral": f"[TOOL_CALLS][{call}]",
        "generic": f"<tool_call>\n{call}\n</tool_call>\n",
    }[name]
    got, _ = stream(fmt, cut(reply, points))
    assert [c.name for c in got.calls] == ["tool"]
    assert got.calls[0].arguments == text and json.loads(text) == args
    check_streamed(got, {0})


def test_a_call_cut_by_the_end_of_the_reply_keeps_what_was_sent() -> None:
    reply = '<tool_call>{"name": "f", "arguments": {"a": 1, "b": "x'
    got, parser = stream(HERMES, list(reply))
    assert [(c.name, c.arguments) for c in got.calls] == [("f", '{"a": 1, "b": "x')]
    check_streamed(got, {0})
    assert parser.cut is not None and parser.cut[0] is got.calls[0] and parser.cut[1] == reply
    assert parse_tool_calls('<tool_call>{"name": "f", "argu', HERMES).calls == ()


def test_json_that_breaks_after_a_call_is_given_back() -> None:
    reply = '<tool_call>{"name": "f", "arguments": {"a": 1}} oops</tool_call>'
    got, _ = stream(HERMES, list(reply))
    assert [(c.name, c.arguments) for c in got.calls] == [("f", '{"a": 1}')]
    assert got.content == " oops"
    broken = '<tool_call>{"name": "f", "arguments": {"a": 1,, "b": 2}}</tool_call>'
    got, _ = stream(HERMES, [broken])
    assert [(c.name, c.arguments) for c in got.calls] == [("f", '{"a": 1,')]
    assert got.content == ', "b": 2}}'
