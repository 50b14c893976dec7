"""Every Jinja filter wrapped so the render's budget sees what it builds.

Before a filter runs: a one-shot iterator handed to it (the output of map/select, a generator) is
materialized with a running size check, and filters whose output can be far larger than their
input (center, indent, replace, format, join, wordwrap, batch, slice, sum, urlize, and the ones
that print a whole structure: string, pprint, tojson, xmlattr, escape, urlencode) have their
result sized from their arguments and refused over the value limit. After it runs, whatever it
built is charged to the render's work budget.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ember.models.text.templates.budget import (
    SLOT,
    LimitExceeded,
    RenderBudget,
    is_lazy,
    printed_size,
)

Check = Callable[[RenderBudget, list[Any], dict[str, Any]], None]
# Filters that print a whole value: their output is about as long as its printed form.
_PRINTERS = frozenset(
    {"string", "pprint", "tojson", "xmlattr", "escape", "e", "forceescape", "urlencode"}
)
_TEXTWRAP_COST = 8  # textwrap keeps several objects per word: cap its input 8x tighter
_PRINTF_WIDTH = re.compile(r"%[-+ #0]*(\d+|\*)?(?:\.(\d+|\*))?")


def wrap_filters(
    filters: dict[str, Callable[..., Any]], budget_of: Callable[[], RenderBudget]
) -> None:
    """Replace each filter in place by its checked, charged version."""
    for name, original in list(filters.items()):
        filters[name] = _checked(name, original, budget_of)


def _checked(
    name: str, original: Callable[..., Any], budget_of: Callable[[], RenderBudget]
) -> Callable[..., Any]:
    first = 1 if getattr(original, "jinja_pass_arg", None) is not None else 0  # ctx/env first
    check = _CHECKS.get(name, _check_printed if name in _PRINTERS else None)

    def checked(*args: Any, **kwargs: Any) -> Any:
        budget = budget_of()
        values = list(args[first:])
        if values and is_lazy(values[0]):
            values[0] = budget.bounded_list(values[0], f"the input of |{name}")
        if check is not None:
            check(budget, values, kwargs)
        result = original(*args[:first], *values, **kwargs)
        if is_lazy(result) or (values and result is values[0]):
            return result  # lazy (sized when consumed) or nothing new
        return budget.charge(result)

    checked.__dict__.update(
        getattr(original, "__dict__", {})
    )  # keep jinja's pass_context/eval_context tags
    return checked


def _arg(values: list[Any], kwargs: dict[str, Any], index: int, key: str, default: Any) -> Any:
    return values[index] if len(values) > index else kwargs.get(key, default)


def _check_printed(budget: RenderBudget, values: list[Any], kwargs: dict[str, Any]) -> None:
    if values:
        budget.check_printed(values[0])


def _check_center(budget: RenderBudget, values: list[Any], kwargs: dict[str, Any]) -> None:
    width = _arg(values, kwargs, 1, "width", 80)
    if isinstance(width, int):
        budget.check_size(width)


def _check_indent(budget: RenderBudget, values: list[Any], kwargs: dict[str, Any]) -> None:
    text = str(values[0]) if values else ""
    width = _arg(values, kwargs, 1, "width", 4)
    pad = len(width) if isinstance(width, str) else int(width)
    budget.check_size(len(text) + (text.count("\n") + 1) * max(pad, 0))


def _check_replace(budget: RenderBudget, values: list[Any], kwargs: dict[str, Any]) -> None:
    if len(values) >= 3:
        check_replace(budget, str(values[0]), str(values[1]), str(values[2]))


def _check_format(budget: RenderBudget, values: list[Any], kwargs: dict[str, Any]) -> None:
    if values:
        check_printf(budget, str(values[0]), (*values[1:], *kwargs.values()))


def _check_join(budget: RenderBudget, values: list[Any], kwargs: dict[str, Any]) -> None:
    if values:
        check_join(budget, values[0], str(_arg(values, kwargs, 1, "d", "")))


def _check_rows(budget: RenderBudget, values: list[Any], kwargs: dict[str, Any]) -> None:
    count = values[1] if len(values) > 1 else None  # batch(linecount) / slice(slices)
    if isinstance(count, int):
        budget.check_size(SLOT * count)  # the last row is padded to this many fill values


def _check_wordwrap(budget: RenderBudget, values: list[Any], kwargs: dict[str, Any]) -> None:
    text = str(values[0]) if values else ""
    width = _arg(values, kwargs, 1, "width", 79)
    wrap = _arg(values, kwargs, 3, "wrapstring", None) or "\n"
    lines = len(text) // max(int(width), 1) + 1
    budget.check_size(len(text) + lines * len(str(wrap)))
    budget.check_size(_TEXTWRAP_COST * len(text), "text to wordwrap")


def _check_sum(budget: RenderBudget, values: list[Any], kwargs: dict[str, Any]) -> None:
    start = _arg(values, kwargs, 2, "start", 0)
    if values and not isinstance(start, int | float):  # summing sequences: quadratic copies
        items = list(values[0])
        total = sum(len(x) if hasattr(x, "__len__") else 1 for x in items)
        budget.check_size(SLOT * total * max(len(items), 1), "a sum of sequences")


def _check_urlize(budget: RenderBudget, values: list[Any], kwargs: dict[str, Any]) -> None:
    text = str(values[0]) if values else ""
    extra = sum(len(str(kwargs.get(k) or "")) for k in ("rel", "target"))
    budget.check_size(len(text) * 4 + (len(text) // 4 + 1) * (64 + 2 * extra))


_CHECKS: dict[str, Check] = {
    "center": _check_center,
    "indent": _check_indent,
    "replace": _check_replace,
    "format": _check_format,
    "join": _check_join,
    "batch": _check_rows,
    "slice": _check_rows,
    "wordwrap": _check_wordwrap,
    "sum": _check_sum,
    "urlize": _check_urlize,
}


def check_replace(budget: RenderBudget, text: str, old: str, new: str) -> None:
    """text.replace(old, new) sized before it runs."""
    hits = text.count(old) if old else len(text) + 1
    budget.check_size(len(text) + hits * max(len(new) - len(old), 0))


def check_join(budget: RenderBudget, items: Any, sep: str) -> None:
    """sep.join(items) sized before it runs (items already materialized)."""
    seq = list(items)
    total = len(sep) * max(len(seq) - 1, 0)
    for item in seq:
        total += printed_size(item, budget.max_value_chars)
        budget.check_size(total, "a joined string")


def check_printf(budget: RenderBudget, fmt: str, args: Any) -> None:
    """fmt % args sized before it runs: every width and precision, and the printed args."""
    for width, precision in _PRINTF_WIDTH.findall(fmt):
        if "*" in (width, precision):
            raise LimitExceeded("'*' widths are not allowed in templates")
        budget.check_size(int(width or 0))
        budget.check_size(int(precision or 0))
    budget.check_size(len(fmt) + printed_size(args, budget.max_value_chars), "a formatted string")
