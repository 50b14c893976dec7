"""Tool-call formats: detection, parsing (whole and streamed), rendering, grammars."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ember.models.text.think_splitter import ThinkSplitter, split_thinking
from ember.models.text.tool_calls import (
    FORMATS,
    ToolCall,
    ToolCallParser,
    detect_tool_format,
    parse_tool_calls,
    template_inputs,
    tool_call_grammar,
)

HERMES, LLAMA3, MISTRAL, GENERIC = (FORMATS[n] for n in ("hermes", "llama3", "mistral", "generic"))
WEATHER = {
    "name": "get_weather",
    "description": "Weather for a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
        "required": ["city"],
    },
}


@pytest.mark.parametrize(
    ("source", "name"),
    [
        ("{% if tools %}<tool_call>{% endif %}<|im_start|>", "hermes"),
        ("{{ tools }}<|start_header_id|>ipython<|eot_id|>", "llama3"),
        ("{% for t in tools %}[AVAILABLE_TOOLS]{% endfor %}[TOOL_CALLS]", "mistral"),
        ("<start_of_turn>user\n{{ messages[0].content }}", "generic"),  # Gemma: no tools
        ("", "generic"),
    ],
)
def test_detect_format(source: str, name: str) -> None:
    assert detect_tool_format(source).name == name


@pytest.mark.parametrize(
    ("fmt", "reply", "content", "calls"),
    [
        (
            HERMES,
            'Sure.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
            "Sure.\n",
            [("get_weather", {"city": "Paris"})],
        ),
        (
            HERMES,
            '<tool_call>{"name": "a", "arguments": {}}</tool_call><tool_call>{"name": "b", "arguments": "{\\"x\\": 1}"}</tool_call>',
            "",
            [("a", {}), ("b", {"x": 1})],
        ),
        (
            LLAMA3,
            '  {"name": "get_weather", "parameters": {"city": "Oslo"}}',
            "",
            [("get_weather", {"city": "Oslo"})],
        ),
        (LLAMA3, '<|python_tag|>{"name": "f", "parameters": {}}', "", [("f", {})]),
        (LLAMA3, 'The JSON is {"a": 1}', 'The JSON is {"a": 1}', []),
        (
            MISTRAL,
            '[TOOL_CALLS][{"name": "f", "arguments": {"q": "x"}}, {"name": "g", "arguments": {}}]',
            "",
            [("f", {"q": "x"}), ("g", {})],
        ),
        (MISTRAL, '[TOOL_CALLS]f[ARGS]{"q": "y"}', "", [("f", {"q": "y"})]),
        (
            GENERIC,
            '<tool_call>\n[{"name": "f", "arguments": {"n": 2}}]\n</tool_call>',
            "",
            [("f", {"n": 2})],
        ),  # SmolLM2
        (
            GENERIC,
            'Let me look.\n```tool_code\nget_weather(city="Rome", unit="c")\n```',
            "Let me look.\n",
            [("get_weather", {"city": "Rome", "unit": "c"})],
        ),  # Gemma
        (GENERIC, "<tool_call>not json</tool_call> ok", "<tool_call>not json</tool_call> ok", []),
        (GENERIC, "```tool_code\nos.system('x')\n```", "```tool_code\nos.system('x')\n```", []),
        (HERMES, "plain answer", "plain answer", []),
    ],
)
def test_parse_whole_and_streamed(fmt, reply, content, calls) -> None:
    parsed = parse_tool_calls(reply, fmt)
    assert parsed.content == content
    assert [(c.name, json.loads(c.arguments)) for c in parsed.calls] == calls
    for size in (1, 3, 7):  # the same result however the text is cut into deltas
        parser = ToolCallParser(fmt)
        parts = []
        for i in range(0, len(reply), size):
            parts += parser.feed(reply[i : i + size])
        parts += parser.finish()
        assert "".join(p for p in parts if isinstance(p, str)) == content
        assert [
            (c.name, json.loads(c.arguments)) for c in parts if isinstance(c, ToolCall)
        ] == calls


def test_streamed_content_is_not_held_longer_than_a_marker_prefix() -> None:
    parser = ToolCallParser(HERMES)
    assert parser.feed("Hello <tool") == ["Hello "]
    assert parser.feed("box> done") == ["<toolbox> done"]


def test_unfinished_call_at_the_end_is_parsed_or_given_back() -> None:
    assert (
        parse_tool_calls('<tool_call>{"name": "f", "arguments": {}}', HERMES).calls[0].name == "f"
    )
    cut = '<tool_call>{"name": "f", "argu'
    assert parse_tool_calls(cut, HERMES).content == cut


def test_generic_rendering_keeps_turns_alternating() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "name": "get_weather", "content": "18 C"},
        {"role": "user", "content": "Thanks!"},
    ]
    out, tools = template_inputs(messages, [WEATHER], GENERIC)
    assert tools is None
    assert [m["role"] for m in out] == ["system", "user", "assistant", "user"]
    assert "get_weather" in out[0]["content"] and "<tool_call>" in out[0]["content"]
    assert json.loads(out[2]["content"].split("\n")[1]) == {
        "name": "get_weather",
        "arguments": {"city": "Paris"},
    }
    assert out[3]["content"] == "<tool_response>\n18 C\n</tool_response>\n\nThanks!"


def test_native_rendering_passes_tools_and_dict_arguments() -> None:
    messages = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
            ],
        },
    ]
    out, tools = template_inputs(messages, [WEATHER], HERMES)
    assert tools == [{"type": "function", "function": WEATHER}]
    assert out[0]["tool_calls"][0]["function"]["arguments"] == {"a": 1}
    plain = [{"role": "user", "content": "hi"}]
    assert template_inputs(plain, None, GENERIC) == (plain, None)


def test_grammar_shapes() -> None:
    special = {"<tool_call>": 151657, "</tool_call>": 151658, "[TOOL_CALLS]": 9}.get
    hermes = tool_call_grammar([WEATHER], HERMES, special)
    assert hermes.startswith("start: <[151657]> ") and hermes.rstrip().endswith("<[151658]>")
    generic = tool_call_grammar([WEATHER], GENERIC)
    assert generic.startswith('start: "<tool_call>" ')
    schema = json.loads(generic.split("%json ", 1)[1].rsplit(' "\\n"', 1)[0])
    assert schema["properties"]["name"] == {"const": "get_weather"}
    assert schema["properties"]["arguments"]["additionalProperties"] is False
    assert "%json" in tool_call_grammar([WEATHER], LLAMA3) and '"parameters"' in tool_call_grammar(
        [WEATHER], LLAMA3
    )
    assert '"["' in tool_call_grammar([WEATHER, {"name": "g"}], MISTRAL, special)
    with pytest.raises(ValueError):
        tool_call_grammar([], HERMES)


def test_think_splitter_streams_reasoning_apart() -> None:
    reply = "<think>\nLet me see: 2+2.\n</think>\n\nIt is 4."
    assert split_thinking(reply) == ("Let me see: 2+2.", "It is 4.")
    for size in (1, 2, 5):
        splitter = ThinkSplitter()
        reasoning, content = "", ""
        for i in range(0, len(reply), size):
            r, c = splitter.feed(reply[i : i + size])
            reasoning, content = reasoning + r, content + c
        r, c = splitter.finish()
        assert ((reasoning + r).strip(), content + c) == ("Let me see: 2+2.", "It is 4.")
    assert split_thinking("hmm</think>answer", starts_inside=True) == ("hmm", "answer")
    assert split_thinking("no thinking here") == ("", "no thinking here")
    assert split_thinking("<think>cut off") == ("cut off", "")
