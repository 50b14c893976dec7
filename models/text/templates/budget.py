"""What one template render may build, counted while it builds it.

Two measures of a value: `printed_size` (how many characters `str(value)` writes, nested lists,
dicts and shared references included: `[a] * 1000` prints a thousand copies of a) and
`alloc_size` (the memory a new value takes beyond what it references: a string's characters, or
a container's slots at 8 per item). Before an operation that can multiply size runs, its result
is sized from its operands and refused over `max_value_chars`; after any operation the sandbox
intercepts, what it allocated is charged to the render's `RenderBudget`, refused past
`max_work_chars` in total. So a render holds at most about max_work_chars of memory, whatever it
chains, and each step is small enough for the deadline to be checked between steps.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

SLOT = 8  # bytes of one container slot (a pointer): a list of n items costs n * SLOT
STR_OBJECT = 56  # bytes of a small str object and its slot (split() builds one per piece)


class LimitExceeded(Exception):
    """A render broke its size, work or time limit (TemplateError at the ChatTemplate level)."""


def printed_size(value: Any, stop_at: int) -> int:
    """Characters str(value) prints, at least; counting stops once past stop_at."""
    total = 0
    stack = [value]
    while stack and total <= stop_at:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item)
        elif isinstance(item, bytes | bytearray):
            total += 4 * len(item)  # repr escapes a byte as up to four characters
        elif isinstance(item, list | tuple | set | frozenset):
            total += 2 + 2 * len(item)  # brackets, separators
            stack.extend(item)
        elif isinstance(item, dict):
            total += 2 + 4 * len(item)
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, bool) or item is None:
            total += 5
        elif isinstance(item, int):
            total += item.bit_length() // 3 + 2  # >= the decimal digits
        elif type(item).__name__ == "Namespace":  # jinja's namespace() prints its attributes
            stack.append(object.__getattribute__(item, "_Namespace__attrs"))
        else:
            total += 24  # floats, Undefined, loop objects: short reprs
    return total


def alloc_size(value: Any) -> int:
    """Memory a freshly built value adds beyond what it references (characters or slots)."""
    if isinstance(value, str | bytes | bytearray):
        return len(value)
    if isinstance(value, list | tuple | set | frozenset | dict):
        return SLOT * len(value)
    return 0


@dataclass
class RenderBudget:
    """The running totals of one render; `charge` every value an intercepted operation built."""

    max_value_chars: int
    max_work_chars: int
    spent_chars: int = 0

    def check_size(self, size: int, what: str = "a value") -> None:
        """Refuse an operation whose result would be size characters (or slots) long."""
        if size > self.max_value_chars:
            raise LimitExceeded(f"{what} of {size} characters exceeds {self.max_value_chars}")

    def check_printed(self, value: Any, what: str = "a value") -> int:
        """Size of str(value) before it is built; refused over the value limit."""
        size = printed_size(value, self.max_value_chars)
        self.check_size(size, what)
        return size

    def spend(self, size: int) -> None:
        """Charge size characters of new data to this render."""
        self.spent_chars += size
        if self.spent_chars > self.max_work_chars:
            raise LimitExceeded(
                f"rendering built more than {self.max_work_chars} characters of data in all"
            )

    def charge(self, value: Any, *, deep: bool = False) -> Any:
        """Check and charge a value just built (deep: its items are new too); returns it."""
        size = printed_size(value, self.max_value_chars) if deep else alloc_size(value)
        self.check_size(size)
        self.spend(size)
        return value

    def bounded_list(self, items: Iterable[Any], what: str = "a sequence") -> list[Any]:
        """Materialize an iterator item by item, refusing it as soon as it grows too large."""
        out: list[Any] = []
        for item in items:  # the items were charged when built: only the slots are new here
            out.append(item)
            self.check_size(SLOT * len(out), what)
        self.spend(SLOT * len(out))
        return out


_ACTIVE: ContextVar[RenderBudget | None] = ContextVar("ember_template_budget", default=None)


def active_budget(max_value_chars: int, max_work_chars: int) -> RenderBudget:
    """The budget of the render in progress; outside one (constant folding at compile time) a
    fresh budget with the same limits, so every size check still applies."""
    budget = _ACTIVE.get()
    return budget if budget is not None else RenderBudget(max_value_chars, max_work_chars)


def start_render(budget: RenderBudget) -> object:
    """Make budget the active one; pass the token to end_render afterwards."""
    return _ACTIVE.set(budget)


def end_render(token: object) -> None:
    _ACTIVE.reset(token)  # type: ignore[arg-type]


def is_lazy(value: Any) -> bool:
    """A one-shot iterator (a generator, map or select result): size unknown until consumed."""
    return isinstance(value, Iterator)
