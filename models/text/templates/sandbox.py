"""The Jinja sandbox chat templates run in: immutable, bounded in size, work and time as it runs.

`ImmutableSandboxedEnvironment` already blocks `__globals__`, `|attr('__class__')`, format-string
attribute escapes and mutation of lists/dicts. On top of it, while a render runs:
- every operation that can multiply size (`*`, `**`, `+`, `~`, `%`, growing str methods, the
  filters in checked_filters.py, printing a value with `{{ }}`) sizes its result from its
  operands *before* computing it, nested and shared values included (`[a] * 1000` printed is a
  thousand copies of a), and refuses it over `max_chars`;
- whatever those operations, slices, method calls and filters build is charged to the render's
  budget (budget.py), so one render never builds more than `max_work_chars` in all;
- a trace hook checks the deadline on every Python line the render runs, and the output is
  capped as it streams. `lipsum` is gone.
"""

from __future__ import annotations

import json
import re
import string
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from types import FrameType
from typing import Any

from jinja2 import nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.exceptions import SecurityError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from ember.models.errors import TemplateError
from ember.models.text.templates.budget import (
    STR_OBJECT,
    LimitExceeded,
    RenderBudget,
    active_budget,
    alloc_size,
    end_render,
    is_lazy,
    printed_size,
    start_render,
)
from ember.models.text.templates.checked_filters import (
    check_join,
    check_printf,
    check_replace,
    wrap_filters,
)


@dataclass(frozen=True)
class TemplateLimits:
    """How long a render may run, how large any one value (and the output) may be, and how much
    data it may build in all (budget.py)."""

    max_seconds: float = 2.0
    max_chars: int = 4 << 20
    max_source_chars: int = 1 << 20
    max_work_chars: int = 32 << 20  # everything one render builds, garbage included

    def __post_init__(self) -> None:
        if min(self.max_seconds, self.max_chars, self.max_source_chars, self.max_work_chars) <= 0:
            raise ValueError("template limits must be positive")


class TemplateRaised(Exception):
    """The template called raise_exception(message)."""


_SIZED = (str, list, tuple)
_MAX_INT_BITS = 1 << 16
_MAX_JSON_INDENT = 64
_SPLITTING_STR_METHODS = frozenset({"split", "rsplit", "splitlines"})
_GROWING_STR_METHODS = frozenset(
    {
        "center",
        "ljust",
        "rjust",
        "zfill",
        "expandtabs",
        "replace",
        "join",
        "format",
        "format_map",
        "translate",
    }
)


class _CheckedCodeGenerator(CodeGenerator):
    """Compiles `a ~ b` into a size-checked join and `a[i:j]` into a charged slice (Jinja's
    own code generator writes both as plain Python, past the environment)."""

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        self.write("environment.checked_concat((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")

    def visit_Getitem(self, node: nodes.Getitem, frame: Frame) -> None:
        if not isinstance(node.arg, nodes.Slice):
            super().visit_Getitem(node, frame)
            return
        self.write("environment.checked_slice(")
        self.visit(node.node, frame)
        self.write(", slice(")
        for part in (node.arg.start, node.arg.stop, node.arg.step):
            if part is None:
                self.write("None")
            else:
                self.visit(part, frame)
            self.write(", ")
        self.write("))")


class LimitedEnvironment(ImmutableSandboxedEnvironment):
    """The sandbox with every size-multiplying operation sized first and charged after."""

    code_generator_class = _CheckedCodeGenerator
    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def __init__(self, limits: TemplateLimits) -> None:
        super().__init__(
            trim_blocks=True,  # as transformers and llama.cpp render chat templates
            lstrip_blocks=True,
            extensions=["jinja2.ext.loopcontrols"],
            finalize=self._finalize_output,  # sees every {{ value }} before str() prints it
        )
        self.limits = limits
        del self.globals["lipsum"]  # lipsum(n=100000) builds megabytes in one call
        self.globals["raise_exception"] = _raise_exception
        self.globals["strftime_now"] = lambda fmt: datetime.now().strftime(str(fmt))
        self.filters["tojson"] = _tojson
        wrap_filters(self.filters, self.budget)

    def budget(self) -> RenderBudget:
        """The running render's budget (a fresh one outside a render)."""
        return active_budget(self.limits.max_chars, self.limits.max_work_chars)

    def unsafe_undefined(self, obj: Any, attribute: str) -> Any:
        # The stock sandbox renders a blocked attribute as an empty Undefined; refuse loudly.
        raise SecurityError(
            f"access to attribute {attribute!r} of {type(obj).__name__!r} is unsafe"
        )

    def _finalize_output(self, value: Any) -> Any:
        budget = self.budget()
        budget.spend(budget.check_printed(value, "an output value"))
        return value

    def checked_concat(self, parts: tuple[Any, ...]) -> str:
        """`a ~ b ~ ...`: every part sized before it is turned into a string."""
        budget = self.budget()
        total = 0
        for part in parts:
            total += printed_size(part, budget.max_value_chars)
            budget.check_size(total, "a joined string")
        budget.spend(total)
        return "".join(str(part) for part in parts)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        budget = self.budget()
        size = self._binop_size(budget, operator, left, right)
        result = super().call_binop(context, operator, left, right)
        budget.spend(size)
        return result

    def _binop_size(self, budget: RenderBudget, operator: str, left: Any, right: Any) -> int:
        """The size of left <operator> right, checked before it is computed."""
        if isinstance(left, int) and isinstance(right, int):
            bits = max(abs(left).bit_length(), 1)
            if operator == "**":  # about bit_length(left) * right bits; big ints cost time too
                bits *= abs(right)
            elif operator == "*":
                bits += abs(right).bit_length()
            if bits > _MAX_INT_BITS:
                raise LimitExceeded(f"an integer of about {bits} bits is too large")
            return 0
        size = 0
        if operator == "*":
            for seq, count in ((left, right), (right, left)):
                if isinstance(seq, _SIZED) and isinstance(count, int):
                    size = alloc_size(seq) * max(count, 0)
        elif operator == "+" and isinstance(left, _SIZED) and isinstance(right, _SIZED):
            size = alloc_size(left) + alloc_size(right)
        elif operator == "%" and isinstance(left, str):
            check_printf(budget, left, right)
            size = len(left) + printed_size(right, budget.max_value_chars)
        budget.check_size(size)
        return size

    def checked_slice(self, obj: Any, index: slice) -> Any:
        """`obj[i:j:k]`: a new string or list, charged to the render."""
        return self.budget().charge(obj[index])

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        target = getattr(__obj, "__wrapped__", __obj)  # the sandbox wraps str.format
        owner = getattr(target, "__self__", None)
        name = getattr(target, "__name__", "")
        budget = __self.budget()
        if isinstance(owner, str) and name in _GROWING_STR_METHODS:
            args = _check_str_method(budget, owner, name, args, kwargs)
        elif isinstance(owner, str) and name in _SPLITTING_STR_METHODS:
            _check_split(budget, owner, name, args, kwargs)
        result = super().call(__context, __obj, *args, **kwargs)
        if result is owner or is_lazy(result):
            return result
        if isinstance(owner, str) and isinstance(result, list | tuple):  # split & co: new pieces
            budget.spend(STR_OBJECT * len(result) + len(owner))
            return result
        return budget.charge(result)


def _check_split(
    budget: RenderBudget, text: str, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    """Size the list of new strings split/rsplit/splitlines would build, before it runs."""
    sep = args[0] if args else kwargs.get("sep")
    if name == "splitlines":
        pieces = text.count("\n") + text.count("\r") + 1
    elif isinstance(sep, str) and sep:
        pieces = text.count(sep) + 1
    else:  # whitespace: at most one piece per two characters
        pieces = len(text) // 2 + 1
    budget.check_size(len(text) + STR_OBJECT * pieces, "a split string")


def _check_str_method(
    budget: RenderBudget, text: str, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Any, ...]:
    """Size a growing str method's result before it runs; returns its (materialized) args."""
    if name in ("center", "ljust", "rjust", "zfill") and args and isinstance(args[0], int):
        budget.check_size(args[0])
    elif name == "expandtabs":
        tab = int(args[0]) if args else int(kwargs.get("tabsize", 8))
        budget.check_size(len(text) + text.count("\t") * max(tab, 0))
    elif name == "replace" and len(args) >= 2:
        check_replace(budget, text, str(args[0]), str(args[1]))
    elif name == "join" and args:
        items = budget.bounded_list(args[0]) if is_lazy(args[0]) else args[0]
        check_join(budget, items, text)
        args = (items, *args[1:])
    elif name in ("format", "format_map"):
        for _, _, spec, _ in string.Formatter().parse(text):
            if spec and "{" in spec:
                raise LimitExceeded("nested format specs are not allowed in templates")
            for width in re.findall(r"\d+", spec or ""):
                budget.check_size(int(width))
        budget.check_size(
            len(text) + printed_size((args, kwargs), budget.max_value_chars), "a formatted string"
        )
    elif name == "translate" and args and isinstance(args[0], dict):
        longest = max((len(str(v)) for v in args[0].values()), default=1)
        budget.check_size(len(text) * max(longest, 1))
    return args


def _raise_exception(message: object) -> None:
    raise TemplateRaised(str(message))


def _tojson(
    value: Any, indent: int | None = None, separators: Any = None, sort_keys: bool = False
) -> str:
    # transformers' tojson: plain JSON, non-ASCII kept (Jinja's own escapes HTML characters).
    if isinstance(indent, int) and indent > _MAX_JSON_INDENT or isinstance(indent, str):
        raise LimitExceeded(f"tojson indent {indent!r} is not allowed (at most {_MAX_JSON_INDENT})")
    return json.dumps(
        value, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys
    )


def render_limited(chunks: Iterator[str], limits: TemplateLimits) -> str:
    """Join a template's output chunks, enforcing the deadline, the output cap and the work
    budget as it goes. The deadline is checked on every line Python runs during the render
    (template code, Jinja's runtime, filters); the size checks keep each C-level step short."""
    deadline = time.monotonic() + limits.max_seconds

    def on_line(frame: FrameType, event: str, arg: Any) -> Any:
        if time.monotonic() > deadline:
            raise LimitExceeded(f"rendering took longer than {limits.max_seconds:g} s")
        return on_line

    previous = sys.gettrace()
    token = start_render(RenderBudget(limits.max_chars, limits.max_work_chars))
    sys.settrace(on_line)
    out: list[str] = []
    total = 0
    try:
        for chunk in chunks:
            total += len(chunk)
            if total > limits.max_chars:
                raise LimitExceeded(f"output exceeds {limits.max_chars} characters")
            out.append(chunk)
            on_line(sys._getframe(), "line", None)
    finally:
        sys.settrace(previous)
        end_render(token)
    return "".join(out)


def limit_error(exc: BaseException) -> TemplateError | None:
    """A TemplateError for a broken limit, or None if exc is something else."""
    if isinstance(exc, LimitExceeded):
        return TemplateError(f"chat template stopped: {exc}")
    return None
