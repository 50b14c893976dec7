"""The shapes of the parameter table: a Range, a Parameter (one row), a View (one API's
name, range and default for a parameter)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

ENGINE_DEFAULT: Any = object()  # a View's default: leave the field to SamplingParams' default


def number_text(value: float) -> str:
    """A bound as people write it: ints exactly (a 64-bit seed too), floats shortest."""
    return str(value) if isinstance(value, int) else f"{value:g}"


@dataclass(frozen=True)
class Range:
    """Numbers from low to high; an open end excludes its bound ((0, 1] excludes 0)."""

    low: float
    high: float
    low_open: bool = False
    high_open: bool = False

    def __contains__(self, value: Any) -> bool:
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return bool(above and below)

    def text(self) -> str:
        """'between 0 and 10' for a closed range, 'in (0, 1]' with an open end."""
        low, high = number_text(self.low), number_text(self.high)
        if not (self.low_open or self.high_open):
            return f"between {low} and {high}"
        left = "(" if self.low_open else "["
        right = ")" if self.high_open else "]"
        return f"in {left}{low}, {high}{right}"

    def capped(self, high: float | None) -> Range:
        """This range with its top lowered to high (a server's --max-tokens cap)."""
        if high is None or high >= self.high:
            return self
        return Range(self.low, high, self.low_open, False)


@dataclass(frozen=True)
class Parameter:
    """One sampling or engine parameter: the value the CLI flag, the settings file, the TUI
    settings and the engine all share.

    range (or choices, or rule) is the engine's range: what flags, settings and SamplingParams /
    EngineOptions accept. reason is the one-line rule a bad value gets (default: from the range).
    group says where it belongs: sampling, repetition, engine, server or eval."""

    name: str
    kind: type
    default: Any
    help: str
    group: str
    range: Range | Callable[[], Range] | None = None
    choices: tuple[str, ...] = ()
    rule: Callable[[Any], bool] | None = None
    reason: str | Callable[[], str] = ""
    label: str = ""  # the TUI's label (default: the name, spaced)
    metavar: str = ""  # the flag's metavar (default: argparse's)
    setting: bool = True  # a settings-file key (and EMBER_<NAME>)

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def bounds(self) -> Range | None:
        """The engine's range (a machine-dependent one, like threads, computed now)."""
        return self.range() if callable(self.range) else self.range

    def why(self) -> str:
        """The rule in words, as a bad value's error says it."""
        if self.reason:
            return self.reason() if callable(self.reason) else self.reason
        if self.choices:
            return f"must be one of {', '.join(self.choices)}"
        bounds = self.bounds()
        return f"must be {bounds.text()}" if bounds else ""

    def problem(self, value: Any) -> str | None:
        """Why value breaks this parameter's rule, or None (None itself passes: not given)."""
        if value is None:
            return None
        if self.rule is not None:
            ok = self.rule(value)
        elif self.choices:
            ok = value in self.choices
        else:
            bounds = self.bounds()
            ok = bounds is None or value in bounds
        return None if ok else self.why()

    @property
    def title(self) -> str:
        return self.label or self.name.replace("_", " ")


@dataclass(frozen=True)
class View:
    """How one API spells a parameter: its field name, its documented range (None: the
    engine's) and the default when the field is absent (ENGINE_DEFAULT: SamplingParams')."""

    field: str
    range: Range | None = None
    default: Any = ENGINE_DEFAULT
