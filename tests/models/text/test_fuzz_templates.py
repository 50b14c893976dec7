"""Fuzz: any template text, built from Jinja's own pieces, renders or ends in a TemplateError,
within its limits; and any message text keeps its content apart from markup."""

from __future__ import annotations

import tracemalloc

from hypothesis import given, settings
from hypothesis import strategies as st

from ember.models.errors import TemplateError
from ember.models.text.templates.chat_template import ChatTemplate
from ember.models.text.templates.sandbox import TemplateLimits
from tests.fixtures.tiny_hf import QWEN3_TEMPLATE
from tests.fuzz import FUZZ, nasty_text

VALUES = ["'a'", "'ab' * 40", "4000000", "99999", "[1, 2]", "messages", "messages[0]",
          "messages[0]['content']", "range(99999)", "namespace(x=1)", "{'k': 'v'}", "2 ** 16",
          "bos_token", "x", "none", "'%s'", "'{}'", "[x] * 300", "x.split()"]  # fmt: skip
OPS = [" * ", " + ", " ~ ", " % ", " ** ", " // "]
FILTERS = ["|join", "|list", "|string", "|tojson", "|center(4000000)", "|replace('a', 'aaaa')",
           "|indent(9999)", "|wordwrap(1)", "|format(x)", "|sum(start=[])", "|batch(99999)",
           "|map('center', 99999)", "|sort", "|unique", "|reverse", "|length", "|trim",
           "|upper", "|e", "|urlencode", "|pprint", "|first", "|select", "|slice(3)"]  # fmt: skip
expressions = st.builds(
    lambda a, op, b, filters: f"({a}{op}{b}){''.join(filters)}",
    st.sampled_from(VALUES), st.sampled_from(OPS), st.sampled_from(VALUES),
    st.lists(st.sampled_from(FILTERS), max_size=3),
)  # fmt: skip
statements = st.one_of(
    expressions.map(lambda e: "{{ " + e + " }}"),
    expressions.map(lambda e: "{% set x = " + e + " %}"),
    expressions.map(lambda e: "{% for i in " + e + " %}{{ i }}{% endfor %}"),
    st.sampled_from(["{% set x %}{{ x }}{{ x }}{% endset %}", "{{ raise_exception('no') }}",
                     "{% macro m(a) %}{{ a ~ a }}{% endmacro %}{{ m(x) }}", "{{", "{% if %}"]),
)  # fmt: skip
LIMITS = TemplateLimits(max_seconds=30, max_chars=1 << 20, max_work_chars=8 << 20)


@settings(FUZZ, max_examples=40)  # each example renders under tracemalloc: slower
@given(st.lists(statements, min_size=1, max_size=5).map("".join))
def test_any_template_renders_or_is_a_template_error_within_its_limits(source: str) -> None:
    tracemalloc.start()
    try:
        try:
            out = ChatTemplate("{% set x = 'seed' %}" + source, "fuzz", limits=LIMITS).render(
                [{"role": "user", "content": "hello"}]
            )
            assert len(out) <= LIMITS.max_chars
        except TemplateError as exc:
            assert "\n" not in str(exc).strip() or "does not compile" in str(exc)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < LIMITS.max_work_chars + 8 * LIMITS.max_chars  # never far past the budget


@FUZZ
@given(st.lists(st.tuples(st.sampled_from(["user", "assistant"]), nasty_text), max_size=4))
def test_any_message_text_stays_content(turns: list[tuple[str, str]]) -> None:
    template = ChatTemplate(QWEN3_TEMPLATE, "tiny qwen3")
    messages = [{"role": role, "content": text} for role, text in turns]
    try:
        segments = template.render_segments(messages)
    except TemplateError:
        return  # refused (a template that cuts content apart): never guessed
    assert "".join(s.text for s in segments) == template.render(messages)
    for message in messages[:-1]:  # earlier turns keep their text, as content, never markup
        text = str(message["content"])
        if message["role"] == "user" and text.strip():
            assert any(text.strip() in s.text for s in segments if not s.from_template)
