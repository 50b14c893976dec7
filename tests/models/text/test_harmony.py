"""Harmony (gpt-oss) replies split into reasoning, content and tool calls as they stream.

However a reply is cut into deltas (every single position, every pair of positions, token by
token through the tiny gpt-oss's own vocabulary and the engine's detokenizer), the splitter
gives the same reasoning, content and calls, and a streamed call's fragments join to exactly
its arguments. Also: the format detected from the template, the built-in template for gpt-oss
files without one and its history rules, the end-of-generation ids, the forced-call grammar.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ember.app.reply_splitter import ReplySplitter
from ember.models.text.harmony import HARMONY_TEMPLATE, HarmonyReply, Header
from ember.models.text.templates.chat_template import ChatTemplate
from ember.models.text.tool_calls import (
    ArgsDelta,
    CallStart,
    ToolCall,
    detect_tool_format,
    template_inputs,
    tool_call_grammar,
    tool_format,
)
from tests.fuzz import FUZZ, nasty_text

ANSWER = (
    "<|channel|>analysis<|message|>The user asks 2+2. Simple: 4.<|end|>"
    "<|start|>assistant<|channel|>final<|message|>2 + 2 = **4**."
)
CALL = (
    "<|channel|>analysis<|message|>Need the weather; call get_weather.<|end|>"
    "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
    '<|message|>{"city": "Paris", "days": [1, 2]}'
)
# (reply, reasoning, content, [(name, arguments)]): the stop token (<|return|> / <|call|>)
# never reaches the text
REPLIES = [
    (ANSWER, "The user asks 2+2. Simple: 4.", "2 + 2 = **4**.", []),
    (CALL, "Need the weather; call get_weather.", "", [("get_weather", '{"city": "Paris", "days": [1, 2]}')]),
    (  # the recipient before the channel, as the template writes history
        '<|channel|>analysis<|message|>x<|end|><|start|>assistant to=functions.f<|channel|>commentary json<|message|>{"a": 1}',
        "x", "", [("f", '{"a": 1}')],
    ),
    (  # a preamble to the user in commentary, then the call; no analysis
        "<|channel|>commentary<|message|>Checking.<|end|><|start|>assistant<|channel|>commentary "
        'to=functions.lookup <|constrain|>json<|message|> {"q": "a <b> string"} ',
        "", "Checking.", [("lookup", '{"q": "a <b> string"}')],
    ),
    ("<|channel|>final<|message|>Just the answer.", "", "Just the answer.", []),
    ("<|channel|>analysis<|message|>cut by max_tokens", "cut by max_tokens", "", []),
    (  # a <|start|> without <|end|> still ends the message
        "<|channel|>analysis<|message|>a<|start|>assistant<|channel|>final<|message|>b", "a", "b", [],
    ),
    ("No harmony at all.\nJust text.", "", "No harmony at all.\nJust text.", []),
    ("<|channel|>commentary to=functions.ping <|constrain|>json<|message|>", "", "", [("ping", "{}")]),
    ("", "", "", []),
]  # fmt: skip


@dataclass
class Streamed:
    reasoning: str = ""
    content: str = ""
    starts: list[CallStart] = field(default_factory=list)
    fragments: dict[int, str] = field(default_factory=dict)
    calls: list[ToolCall] = field(default_factory=list)


def split(chunks: list[str], parse_tools: bool = True) -> tuple[Streamed, HarmonyReply]:
    reply, got = HarmonyReply(parse_tools), Streamed()
    for parts in [reply.feed(c) for c in chunks] + [reply.finish()]:
        reasoning, content, events = parts
        got.reasoning += reasoning
        got.content += content
        for event in events:
            if isinstance(event, CallStart):
                got.starts.append(event)
            elif isinstance(event, ArgsDelta):
                got.fragments[event.index] = got.fragments.get(event.index, "") + event.text
            else:
                got.calls.append(event)
    return got, reply


def check(got: Streamed, reasoning: str, content: str, calls: list[tuple[str, str]]) -> None:
    assert (got.reasoning, got.content) == (reasoning, content)
    assert [(c.name, c.arguments) for c in got.calls] == calls
    assert [(s.index, s.name) for s in got.starts] == [(i, n) for i, (n, _) in enumerate(calls)]
    for start, call in zip(got.starts, got.calls, strict=True):
        assert call.id == start.id and got.fragments[start.index] == call.arguments


def cut(text: str, points: list[int]) -> list[str]:
    bounds = sorted({0, len(text), *(p % (len(text) + 1) for p in points)})
    return [text[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


@pytest.mark.parametrize(("reply", "reasoning", "content", "calls"), REPLIES)
def test_every_split_position_gives_the_same_parts(reply, reasoning, content, calls) -> None:
    check(split([reply])[0], reasoning, content, calls)
    check(split(list(reply))[0], reasoning, content, calls)  # one character at a time
    for at in range(len(reply) + 1):  # every single cut, mid-tag included
        check(split(cut(reply, [at]))[0], reasoning, content, calls)


@pytest.mark.parametrize("reply", [ANSWER, CALL])
def test_every_pair_of_cuts_gives_the_same_parts(reply: str) -> None:
    whole, _ = split([reply])
    expected = (whole.reasoning, whole.content, [(c.name, c.arguments) for c in whole.calls])
    for a, b in combinations(range(0, len(reply) + 1, 2), 2):
        check(split(cut(reply, [a, b]))[0], *expected)


def test_an_end_marker_inside_arguments_ends_the_call_as_the_token_does() -> None:
    """In the model's tokens <|end|> is one special token that ends the message wherever it
    stands; the call ends there (the model's own, not cut) and what follows is not a header."""
    reply = '<|channel|>commentary to=functions.f <|constrain|>json<|message|>{"q": "<|end|>x"}'
    got, parser = split([reply])
    check(got, "", 'x"}', [("f", '{"q": "')])
    assert parser.cut is None


@FUZZ
@given(st.integers(0, len(REPLIES) - 1), st.lists(st.integers(0, 400), max_size=12))
def test_any_split_gives_the_same_parts(case: int, points: list[int]) -> None:
    reply = REPLIES[case][0]
    whole, _ = split([reply])
    got, _ = split(cut(reply, points))
    check(got, whole.reasoning, whole.content, [(c.name, c.arguments) for c in whole.calls])


text_without_markers = nasty_text.filter(lambda t: "<|" not in t and "|>" not in t)


@FUZZ
@given(text_without_markers, text_without_markers, st.lists(st.integers(0, 999), max_size=10))
def test_any_reasoning_and_answer_come_out_exactly(thought: str, answer: str, points) -> None:
    reply = (
        f"<|channel|>analysis<|message|>{thought}<|end|>"
        f"<|start|>assistant<|channel|>final<|message|>{answer}"
    )
    got, _ = split(cut(reply, points))
    assert (got.reasoning, got.content, got.calls) == (thought, answer, [])


@FUZZ
@given(
    st.dictionaries(text_without_markers, st.integers() | text_without_markers, max_size=4),
    st.lists(st.integers(0, 999), max_size=10),
)
def test_any_arguments_stream_exactly(args: dict[str, Any], points: list[int]) -> None:
    text = json.dumps(args, ensure_ascii=False)
    reply = f"<|channel|>commentary to=functions.tool <|constrain|>json<|message|>{text}"
    got, parser = split(cut(reply, points))
    check(got, "", "", [("tool", text)])
    assert json.loads(got.calls[0].arguments) == args and parser.cut is None


def test_a_call_cut_by_the_length_limit_comes_back_as_text() -> None:
    reply = '<|channel|>commentary to=functions.f <|constrain|>json<|message|>{"city": "Par'
    streamed = ReplySplitter("harmony", parse_tools=True)
    _, _, events = streamed.stream(reply, final=True)
    assert streamed.cut and isinstance(events[-1], ToolCall)  # streamed: the client saw it start
    whole = ReplySplitter("harmony", parse_tools=True)
    reasoning, content, calls = whole.feed(reply, final=True)
    assert (reasoning, content, calls, whole.calls) == ("", reply, [], [])


def test_without_tools_a_call_stays_text_and_reasoning_still_splits() -> None:
    got, _ = split([CALL], parse_tools=False)
    assert got.reasoning == "Need the weather; call get_weather." and got.calls == []
    assert got.content == (
        "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
        '<|message|>{"city": "Paris", "days": [1, 2]}'
    )


def test_the_reply_splitter_reports_reasoning_while_inside_it() -> None:
    splitter = ReplySplitter("harmony", parse_tools=False)
    splitter.stream("<|channel|>analysis<|message|>hm")
    assert splitter.in_reasoning
    splitter.stream("m<|end|><|start|>assistant<|channel|>final<|message|>ok")
    assert not splitter.in_reasoning


def test_headers() -> None:
    assert (
        Header.parse(
            "<|start|>assistant<|channel|>commentary to=functions.a.b <|constrain|>json"
        ).function
        == "a.b"
    )
    assert Header.parse("assistant to=functions.f<|channel|>commentary json").function == "f"
    assert Header.parse("<|channel|>commentary").function == ""  # a preamble
    assert Header.parse("<|channel|>analysis to=python").function == ""  # not commentary
    assert Header.parse("<|channel|>final").channel == "final"  # fmt: skip


# ---- the format, the template, the vocabulary --------------------------------------------------


def test_the_format_is_detected_from_the_template() -> None:
    assert detect_tool_format(HARMONY_TEMPLATE).name == "harmony"
    no_tools = "{% for m in messages %}<|start|>{{ m.role }}<|channel|>final<|message|>{{ m.content }}<|end|>{% endfor %}"
    assert detect_tool_format(no_tools).name == "harmony"  # replies split without tools too
    assert detect_tool_format("{{ tools }}<tool_call>").name == "hermes"
    with pytest.raises(ValueError, match="channel messages"):
        _ = tool_format("harmony").primary


@pytest.mark.parametrize("arch", ["gpt-oss", "gpt_oss"])
def test_a_gpt_oss_file_without_a_template_gets_the_built_in_harmony(arch: str) -> None:
    template = ChatTemplate.for_architecture(arch)
    assert template.template_source == "built-in harmony"
    assert detect_tool_format(template.source).name == "harmony"
    assert ChatTemplate.for_architecture("llama").template_source == "built-in chatml"


WEATHER = {"name": "get_weather", "description": "Weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}  # fmt: skip


def _history(thinking: str, final_after: bool) -> list[dict[str, Any]]:
    call = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}  # fmt: skip
    turns: list[dict[str, Any]] = [
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": "", "reasoning_content": thinking, "tool_calls": [call]},
        {"role": "tool", "content": "sunny", "tool_call_id": "c1", "name": "get_weather"},
    ]
    if final_after:
        turns += [
            {"role": "assistant", "content": "Sunny.", "reasoning_content": "It is sunny."},
            {"role": "user", "content": "Thanks"},
        ]
    return turns


def test_history_keeps_analysis_only_for_a_tool_call_turn_without_a_later_answer() -> None:
    template, fmt = ChatTemplate(HARMONY_TEMPLATE, "built-in harmony"), tool_format("harmony")
    messages, tools = template_inputs(_history("Look it up.", False), [WEATHER], fmt)
    text = template.render(messages, tools=tools)
    assert (
        "<|start|>user<|message|>Weather in Oslo?<|end|>"
        "<|start|>assistant<|channel|>analysis<|message|>Look it up.<|end|>"
        "<|start|>assistant to=functions.get_weather<|channel|>commentary json"
        '<|message|>{"city": "Oslo"}<|call|>'
        "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>"
        '"sunny"<|end|><|start|>assistant'
    ) in text
    messages, tools = template_inputs(_history("Look it up.", True), [WEATHER], fmt)
    later = template.render(messages, tools=tools)
    assert "Look it up." not in later and "It is sunny." not in later  # a final answer followed
    assert "<|start|>assistant<|channel|>final<|message|>Sunny.<|end|>" in later


def test_past_reasoning_reaches_only_a_harmony_template() -> None:
    messages, _ = template_inputs(_history("secret", False), [WEATHER], tool_format("hermes"))
    assert all("reasoning_content" not in m and "thinking" not in m for m in messages)
    messages, _ = template_inputs(_history("secret", False), [WEATHER], tool_format("generic"))
    assert "secret" not in json.dumps(messages)


def test_the_forced_call_grammar_names_each_tool_and_its_arguments() -> None:
    ids = {"<|channel|>": 5, "<|constrain|>": 6, "<|message|>": 4}
    clock = {"name": "get_time", "parameters": {"type": "object", "properties": {}}}
    grammar = tool_call_grammar([WEATHER, clock], tool_format("harmony"), ids.get)
    start, weather, time = grammar.strip().split("\n")
    assert start == 'start: <[5]> "commentary to=functions." (call_0 | call_1)'
    assert weather.startswith('call_0: "get_weather " <[6]> "json" <[4]> %json {')
    assert json.loads(weather.split("%json ", 1)[1])["properties"] == {"city": {"type": "string"}}
    assert time.startswith('call_1: "get_time " <[6]> "json" <[4]> %json {')


# ---- real token streams: the tiny gpt-oss's vocabulary through the engine's detokenizer -------


@pytest.fixture(scope="module")
def gptoss_tokenizers(tiny_gptoss: Any) -> list[Any]:
    from ember.models.text.tokenizers.open import open_tokenizer

    return [open_tokenizer(tiny_gptoss.gguf("Q8_0")), open_tokenizer(tiny_gptoss.hf_dir)]


def test_token_by_token_through_the_detokenizer(gptoss_tokenizers: list[Any]) -> None:
    from ember.engine.detokenizer import Detokenizer

    for tokenizer in gptoss_tokenizers:
        for reply, reasoning, content, calls in REPLIES[:3]:
            ids = tokenizer.encode(reply, parse_special=True)
            specials = [i for i in ids if i in tokenizer.special_ids]
            assert len(specials) == reply.count("<|")  # each marker is one special token
            detok = Detokenizer(tokenizer)
            deltas = [detok.add(i) for i in ids] + [detok.flush()]
            check(split(deltas)[0], reasoning, content, calls)


def test_end_closes_a_message_not_the_reply(gptoss_tokenizers: list[Any]) -> None:
    """<|end|> ends the analysis and the answer follows; <|return|> and <|call|> end the reply
    (as llama.cpp decides for this vocabulary, and now the tokenizer.json reader too)."""
    ends = []
    for tokenizer in gptoss_tokenizers:
        spelled = {tokenizer.token_bytes(i).decode() for i in tokenizer.eot_ids}
        assert {"<|return|>", "<|call|>"} <= spelled and "<|end|>" not in spelled
        ends.append(spelled)
    assert ends[0] == ends[1]
