"""Template rendering is bounded in size, total work and time while it runs, not after.

Each hostile template must end in a TemplateError naming the limit, and the render must never
have allocated much more than the work budget (tracemalloc's peak, not a timing).
"""

from __future__ import annotations

import tracemalloc

import pytest

from ember.models.errors import TemplateError
from ember.models.text.templates.chat_template import ChatTemplate
from ember.models.text.templates.sandbox import TemplateLimits
from tests.fixtures.tiny_hf import CHATML_TEMPLATE, GEMMA_TEMPLATE, QWEN3_TEMPLATE

BIG = "{% set a = 'a' * 4000000 %}"
SLICES = "[" + ", ".join(f"a[{i}:]" for i in range(1, 11)) + "]"
ATTACKS = {
    "refs printed": (BIG + "{{ [a] * 1000 }}", "an output value of"),
    "refs joined": (BIG + "{{ ([a] * 1000) | join }}", "a joined string of"),
    "refs concatenated": (BIG + "{{ ([a] * 1000) ~ '' }}", "a joined string of"),
    "refs as string": (BIG + "{{ ([a] * 1000) | string | length }}", "exceeds"),
    "refs as json": (BIG + "{{ ([a] * 1000) | tojson | length }}", "exceeds"),
    "refs formatted": (BIG + "{{ '%s' % ([a] * 1000,) }}", "a formatted string of"),
    "refs str.format": (BIG + "{{ '{}'.format([a] * 1000) }}", "a formatted string of"),
    "refs in a namespace": (BIG + "{% set ns = namespace(x=[a] * 1000) %}{{ ns }}", "output value"),
    "map center list": ("{{ range(1000) | map('center', 4000000) | list | length }}", "in all"),
    "map center join": ("{{ range(1000) | map('center', 4000000) | join | length }}", "in all"),
    "set block": (BIG + "{% set x %}{% for i in range(99999) %}{{ a }}{% endfor %}{% endset %}",
                  "in all"),
    "macro calls": (BIG + "{% macro m() %}{{ a }}{% endmacro %}"
                    "{% for i in range(1000) %}{% set x = m() %}{% endfor %}", "in all"),
    "slices": (BIG + "{{ " + SLICES + " | length }}", "in all"),
    "chained replace": (BIG + "{{ a | replace('a', 'bb') | replace('b', 'cc') }}", "exceeds"),
    "split pieces": ("{% set a = 'ab ' * 1300000 %}{{ a.split() | length }}", "a split string"),
    "list sum": ("{{ ([[1]] * 100000) | sum(start=[]) | length }}", "a sum of sequences"),
    "translate": ("{{ ('a' * 1000).translate({97: 'b' * 100000}) }}", "exceeds"),
    "wordwrap": ("{{ ('ab ' * 1000000) | wordwrap(1) }}", "exceeds"),
    "growing list": ("{% set ns = namespace(l=[]) %}{% for i in range(99999) %}"
                     "{% set ns.l = ns.l + [i] %}{% endfor %}", "in all"),
    "big int product": ("{% set x = 2 ** 60000 %}{{ x * x * x }}", "bits is too large"),
}  # fmt: skip


@pytest.mark.parametrize("name", list(ATTACKS))
def test_attack_stops_early_with_its_limit_named(name: str) -> None:
    source, reason = ATTACKS[name]
    # a generous deadline, so the size and work limits are what stops these (not the clock)
    template = ChatTemplate(source, "test", limits=TemplateLimits(max_seconds=120))
    tracemalloc.start()
    try:
        with pytest.raises(TemplateError, match="chat template stopped") as caught:
            template.render([{"role": "user", "content": "hi"}])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert reason in str(caught.value)
    limits = template.limits
    assert peak < limits.max_work_chars + 4 * limits.max_chars  # bounded by the budget


def test_deadline_stops_long_python_work_inside_a_filter() -> None:
    template = ChatTemplate(
        "{% for i in range(99999) %}{{ ('word ' * 50000) | wordwrap(3) | length }}{% endfor %}",
        "test",
        limits=TemplateLimits(max_seconds=0.3, max_work_chars=1 << 40),
    )
    with pytest.raises(TemplateError, match=r"longer than 0.3 s"):
        template.render([])


@pytest.mark.parametrize("source", [CHATML_TEMPLATE, GEMMA_TEMPLATE, QWEN3_TEMPLATE])
def test_large_benign_conversations_stay_well_inside_the_limits(source: str) -> None:
    messages = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " + "w " * 25_000}
        for i in range(20)
    ]  # 1M characters in all
    segments = ChatTemplate(source, "test").render_segments(messages)
    content = "".join(s.text for s in segments if not s.from_template)
    assert sum(len(m["content"].strip()) for m in messages) <= len(content)


def test_limits_are_validated() -> None:
    with pytest.raises(ValueError, match="positive"):
        TemplateLimits(max_work_chars=0)
