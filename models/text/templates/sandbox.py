"""The Jinja sandbox chat templates run in: immutable, size-checked before allocating, deadlined.

`ImmutableSandboxedEnvironment` already blocks `__globals__`, `|attr('__class__')`, format-string
attribute escapes and mutation of lists/dicts. On top of it every operation that can grow a string
or list faster than the template's own loops (`*`, `**`, `+`, `~`, `%`, str.format widths,
center/ljust/rjust/zfill/expandtabs/replace/join, the center/indent/replace/format/join/batch/slice
filters, big-integer powers, tojson indents) checks the size of its result *before* computing it,
`lipsum` is gone, and `render_limited` stops a render that runs past its deadline (a trace hook
watches template lines and generator resumptions) or its output cap.
"""

from __future__ import annotations

import json
import re
import string
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from types import FrameType
from typing import Any

from jinja2 import nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.exceptions import SecurityError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from ember.models.errors import TemplateError


@dataclass(frozen=True)
class TemplateLimits:
    """How long a render may run and how many characters any string (and the output) may hold."""

    max_seconds: float = 2.0
    max_chars: int = 4 << 20
    max_source_chars: int = 1 << 20

    def __post_init__(self) -> None:
        if self.max_seconds <= 0 or self.max_chars <= 0 or self.max_source_chars <= 0:
            raise ValueError("template limits must be positive")


class TemplateRaised(Exception):
    """The template called raise_exception(message)."""


class _LimitExceeded(Exception):
    pass


_WIDTH = re.compile(r"%[-+ #0]*(\d+|\*)?(?:\.(\d+|\*))?")
_SIZED = (str, list, tuple)
_MAX_POWER_BITS = 1 << 16
_MAX_JSON_INDENT = 64


class _CheckedCodeGenerator(CodeGenerator):
    """Compiles `a ~ b` into a size-checked join instead of a plain str.join."""

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        self.write("environment.checked_concat((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


class LimitedEnvironment(ImmutableSandboxedEnvironment):
    """The sandbox with a cap on every string it builds."""

    code_generator_class = _CheckedCodeGenerator
    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def __init__(self, limits: TemplateLimits) -> None:
        super().__init__(
            trim_blocks=True,  # as transformers and llama.cpp render chat templates
            lstrip_blocks=True,
            extensions=["jinja2.ext.loopcontrols"],
        )
        self.limits = limits
        del self.globals["lipsum"]  # lipsum(n=100000) builds megabytes in one call
        self.globals["raise_exception"] = _raise_exception
        self.globals["strftime_now"] = lambda fmt: datetime.now().strftime(str(fmt))
        self.filters["tojson"] = _tojson
        for name in ("center", "indent", "replace", "format", "join", "batch", "slice"):
            self.filters[name] = self._checked_filter(name, self.filters[name])

    def unsafe_undefined(self, obj: Any, attribute: str) -> Any:
        # The stock sandbox renders a blocked attribute as an empty Undefined; refuse loudly.
        raise SecurityError(
            f"access to attribute {attribute!r} of {type(obj).__name__!r} is unsafe"
        )

    def check(self, chars: int) -> None:
        """Refuse a string/list of chars characters (or items) beyond the cap."""
        if chars > self.limits.max_chars:
            raise _LimitExceeded(f"a value of {chars} characters exceeds {self.limits.max_chars}")

    def checked_concat(self, parts: tuple[Any, ...]) -> str:
        """`a ~ b ~ ...`: str of each part, total size checked before joining."""
        texts = [str(part) for part in parts]
        self.check(sum(map(len, texts)))
        return "".join(texts)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "*":
            for seq, count in ((left, right), (right, left)):
                if isinstance(seq, _SIZED) and isinstance(count, int):
                    self.check(len(seq) * max(count, 0))
        elif operator == "**" and isinstance(left, int) and isinstance(right, int):
            # the result has about bit_length(left) * right bits; big ints cost time, not just space
            if max(abs(left).bit_length(), 1) * abs(right) > _MAX_POWER_BITS:
                raise _LimitExceeded(
                    f"a power of {abs(left).bit_length()}-bit ** {right} is too large"
                )
        elif operator == "+" and isinstance(left, _SIZED) and isinstance(right, _SIZED):
            self.check(len(left) + len(right))
        elif operator == "%" and isinstance(left, str):
            self._check_printf(left)
        return super().call_binop(context, operator, left, right)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        target = getattr(__obj, "__wrapped__", __obj)  # the sandbox wraps str.format
        owner = getattr(target, "__self__", None)
        if isinstance(owner, str):
            __self._check_str_method(owner, getattr(target, "__name__", ""), args, kwargs)
        return super().call(__context, __obj, *args, **kwargs)

    def _check_str_method(self, text: str, name: str, args: tuple, kwargs: dict) -> None:
        if name in ("center", "ljust", "rjust", "zfill") and args and isinstance(args[0], int):
            self.check(args[0])
        elif name == "expandtabs":
            self.check(len(text) * max(int(args[0]) if args else 8, 1))
        elif name == "replace" and len(args) >= 2:
            self._check_replace(text, str(args[0]), str(args[1]))
        elif name == "join" and args:
            self._check_join(args[0], text)
        elif name in ("format", "format_map"):
            self._check_format(text)

    def _check_replace(self, text: str, old: str, new: str) -> None:
        hits = text.count(old) if old else len(text) + 1
        self.check(len(text) + hits * max(len(new) - len(old), 0))

    def _check_join(self, items: Any, sep: str) -> None:
        seq = list(items)
        self.check(sum(len(str(x)) for x in seq) + len(sep) * max(len(seq) - 1, 0))

    def _check_format(self, fmt: str) -> None:
        for _, _, spec, _ in string.Formatter().parse(fmt):
            if spec and "{" in spec:
                raise _LimitExceeded("nested format specs are not allowed in templates")
            for width in re.findall(r"\d+", spec or ""):
                self.check(int(width))

    def _check_printf(self, fmt: str) -> None:
        for width, precision in _WIDTH.findall(fmt):
            if "*" in (width, precision):
                raise _LimitExceeded("'*' widths are not allowed in templates")
            self.check(int(width or 0))
            self.check(int(precision or 0))

    def _checked_filter(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def checked(*args: Any, **kwargs: Any) -> Any:
            values = [a for a in args if not hasattr(a, "environment")]  # drop eval context
            if name == "center" and len(values) > 1 and isinstance(values[1], int):
                self.check(values[1])
            elif name == "indent" and values:
                width = values[1] if len(values) > 1 else kwargs.get("width", 4)
                pad = len(width) if isinstance(width, str) else int(width)
                self.check(len(str(values[0])) * (pad + 1))
            elif name == "replace" and len(values) >= 3:
                self._check_replace(str(values[0]), str(values[1]), str(values[2]))
            elif name == "format" and values:
                self._check_printf(str(values[0]))
            elif name in ("batch", "slice") and len(values) > 1 and isinstance(values[1], int):
                self.check(values[1])  # batch pads its last row to this many fill values
            elif name == "join" and values:
                sep = values[1] if len(values) > 1 else kwargs.get("d", "")
                self._check_join(values[0], str(sep))
            return original(*args, **kwargs)

        checked.__dict__.update(original.__dict__)  # keep jinja's pass_context/eval_context tags
        return checked


def _raise_exception(message: object) -> None:
    raise TemplateRaised(str(message))


def _tojson(
    value: Any, indent: int | None = None, separators: Any = None, sort_keys: bool = False
) -> str:
    # transformers' tojson: plain JSON, non-ASCII kept (Jinja's own escapes HTML characters).
    if isinstance(indent, int) and indent > _MAX_JSON_INDENT or isinstance(indent, str):
        raise _LimitExceeded(
            f"tojson indent {indent!r} is not allowed (at most {_MAX_JSON_INDENT})"
        )
    return json.dumps(
        value, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys
    )


def render_limited(chunks: Iterator[str], limits: TemplateLimits) -> str:
    """Join a template's output chunks, enforcing the deadline and the output cap as it goes."""
    deadline = time.monotonic() + limits.max_seconds

    def on_line(frame: FrameType, event: str, arg: Any) -> Any:
        if time.monotonic() > deadline:
            raise _LimitExceeded(f"rendering took longer than {limits.max_seconds:g} s")
        return on_line

    def on_call(frame: FrameType, event: str, arg: Any) -> Any:
        on_line(frame, event, arg)
        # Only template code (compiled from "<template>") is traced line by line.
        return on_line if frame.f_code.co_filename == "<template>" else None

    previous = sys.gettrace()
    sys.settrace(on_call)
    out: list[str] = []
    total = 0
    try:
        for chunk in chunks:
            total += len(chunk)
            if total > limits.max_chars:
                raise _LimitExceeded(f"output exceeds {limits.max_chars} characters")
            out.append(chunk)
            on_line(sys._getframe(), "line", None)
    finally:
        sys.settrace(previous)
    return "".join(out)


def limit_error(exc: BaseException) -> TemplateError | None:
    """A TemplateError for a broken limit, or None if exc is something else."""
    if isinstance(exc, _LimitExceeded):
        return TemplateError(f"chat template stopped: {exc}")
    return None
