"""A simple labelled form: one row per field (Input, Switch or Select), read back as typed values."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.content import Content
from textual.widgets import Input, Label, Select, Switch


@dataclass(frozen=True)
class FormField:
    """One setting: its name, label, current value and type; choices make it a Select."""

    name: str
    label: str
    value: Any
    kind: type = str  # str | int | float | bool
    choices: tuple[str, ...] = ()
    optional: bool = False  # an empty Input reads as None


class FormError(ValueError):
    """A field does not parse as its type (names the field)."""


class Form(VerticalScroll):
    """Renders FormFields; `values()` parses them (FormError names the first bad one)."""

    def __init__(self, fields: list[FormField], *, id: str | None = None) -> None:
        super().__init__(id=id, classes="form")
        self.fields = fields

    def compose(self) -> ComposeResult:
        for f in self.fields:
            with Horizontal(classes="form-row"):
                yield Label(Content(f.label), classes="form-label")
                yield self._editor(f)

    @staticmethod
    def _editor(f: FormField) -> Input | Switch | Select[str]:
        wid = f"field-{f.name}"
        if f.kind is bool:
            return Switch(bool(f.value), id=wid)
        if f.choices:
            options = list(f.choices)
            if str(f.value) not in options:
                options.insert(0, str(f.value))
            return Select([(o, o) for o in options], value=str(f.value), allow_blank=False, id=wid)
        value = "" if f.value is None else str(f.value)
        restrict = {int: r"-?[0-9]*", float: r"-?[0-9]*\.?[0-9]*"}.get(f.kind)
        return Input(value, id=wid, restrict=restrict)

    def values(self) -> dict[str, Any]:
        """Every field parsed to its type."""
        out: dict[str, Any] = {}
        for f in self.fields:
            widget = self.query_one(f"#field-{f.name}")
            if isinstance(widget, Switch):
                out[f.name] = widget.value
                continue
            raw = str(getattr(widget, "value", "")).strip()
            if f.optional and raw == "":
                out[f.name] = None
                continue
            try:
                out[f.name] = f.kind(raw)
            except ValueError:
                raise FormError(f"{f.label}: {raw!r} is not a valid {f.kind.__name__}") from None
        return out
