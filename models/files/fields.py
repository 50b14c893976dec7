"""Typed reads of model metadata: config.json, tokenizer_config.json, GGUF metadata, Hub answers.

Public API:
    Fields(data, source, prefix="")   one JSON object or metadata dict, read field by field
        .integer / .number / .string / .boolean (key, default=REQUIRED, ...) -> typed value
        .opt_integer / .opt_number / .opt_string / .opt_boolean (key, default=None, ...)
        .object(key) -> Fields | None     a nested object (its fields named "key.sub")
        .array(key) -> list | None        a list, items unchecked (read them with item_*)
        .item_string / .item_boolean(key, index, value)   one list item, named "key[index]"
        .has(key), .raw(key), .error(key, reason) -> ModelFileError
    parse_json(text, source) -> Any       bounded: size cap, nesting refused, never a traceback
    read_json_file(path, label) -> Any    the same for a file (missing, unreadable, bad UTF-8)
    read_text_file(path, label) -> str    a UTF-8 text file (invalid bytes refused)
    describe(value) -> str                a short, printable rendering of an offending value
    built(source, cls, **kwargs)          cls(**kwargs) with its ModelFileError prefixed by source

Every failure is one ModelFileError line "<source>: <field>: <reason>". The rules:
- null and an absent key both mean "not given": the default applies (REQUIRED: an error), except
  in opt_* reads, where an explicit null is None (a feature switched off) and absence is the
  default.
- integer: a JSON integer (or an integral float such as 4096.0), never a bool; within [lo, hi].
- number: any number but a bool, finite (NaN and infinities refused), within [lo, hi], and > 0
  when positive=True.
- string: a string, one of choices when given.  boolean: true or false only.
The same checks serve GGUF metadata (typed by the file) and JSON (typed by whoever wrote it).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final, TypeVar

from ember.models.errors import ModelFileError


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


T = TypeVar("T")
REQUIRED: Final[Any] = _Required()
_ABSENT: Final = object()
MAX_JSON_BYTES = 64 * 1024 * 1024
INT_LIMIT = 1 << 63  # no size, count or id in a model's metadata reaches this
_SHORT = 40  # characters of an offending value shown in an error


def describe(value: object) -> str:
    """A short rendering of a value for an error line (containers by kind, strings cut)."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list | tuple):
        if len(value) <= 8 and not any(isinstance(v, dict | list | tuple) for v in value):
            text = "[" + ", ".join(describe(v) for v in value) + "]"
            if len(text) <= _SHORT:
                return text
        return f"a list of {len(value)}"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**15:
        return f"an integer of {len(str(abs(value)))} digits"
    text = repr(value)  # escapes control characters
    return text if len(text) <= _SHORT else text[: _SHORT - 3] + "..."


class Fields:
    """Typed, range-checked reads of one mapping; errors name source and field."""

    def __init__(self, data: Mapping[str, Any], source: str, prefix: str = "") -> None:
        self.data = data
        self.source = source
        self.prefix = prefix

    def name(self, key: str) -> str:
        """The field's full name (nested objects joined with '.')."""
        return f"{self.prefix}{key}"

    def error(self, key: str, reason: str) -> ModelFileError:
        """The one-line error for field key."""
        return ModelFileError(f"{self.source}: {self.name(key)}: {reason}")

    def has(self, key: str) -> bool:
        """Whether key is present and not null."""
        return self.data.get(key) is not None

    def raw(self, key: str) -> Any:
        """The untyped value (None when absent)."""
        return self.data.get(key)

    def _given(self, key: str, default: Any) -> Any:
        value = self.data.get(key)
        if value is not None:
            return value
        if default is REQUIRED:
            raise self.error(key, "missing")
        return _ABSENT if default is None else default

    # -- integers --------------------------------------------------------------------------
    def _as_int(self, key: str, value: Any, lo: int, hi: int) -> int:
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, f"must be an integer, got {describe(value)}")
        if not lo <= value <= hi:
            raise self.error(key, f"must be in {lo}..{hi}, got {describe(value)}")
        return value

    def integer(self, key: str, default: Any = REQUIRED, lo: int = 0, hi: int = INT_LIMIT) -> int:
        """An integer in [lo, hi]; default when absent or null."""
        value = self._given(key, default)
        if value is _ABSENT:
            raise self.error(key, "missing")
        return self._as_int(key, value, lo, hi)

    def opt_integer(
        self, key: str, default: int | None = None, lo: int = 0, hi: int = INT_LIMIT
    ) -> int | None:
        """An integer in [lo, hi]; default when absent, None when null."""
        if key not in self.data:
            return default
        value = self.data[key]
        return None if value is None else self._as_int(key, value, lo, hi)

    # -- floats ----------------------------------------------------------------------------
    def _as_float(
        self, key: str, value: Any, lo: float | None, hi: float | None, positive: bool
    ) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.error(key, f"must be a number, got {describe(value)}")
        try:
            number = float(value)
        except OverflowError:  # an int beyond float range
            raise self.error(key, f"must be a finite number, got {describe(value)}") from None
        if not math.isfinite(number):
            raise self.error(key, f"must be a finite number, got {describe(value)}")
        if positive and number <= 0:
            raise self.error(key, f"must be > 0, got {describe(value)}")
        if (lo is not None and number < lo) or (hi is not None and number > hi):
            bound = (
                f"<= {hi:g}" if lo is None else f">= {lo:g}" if hi is None else f"in {lo:g}..{hi:g}"
            )
            raise self.error(key, f"must be {bound}, got {describe(value)}")
        return number

    def number(
        self,
        key: str,
        default: Any = REQUIRED,
        lo: float | None = None,
        hi: float | None = None,
        positive: bool = False,
    ) -> float:
        """A finite number (as float) in [lo, hi], > 0 if positive; default when absent."""
        value = self._given(key, default)
        if value is _ABSENT:
            raise self.error(key, "missing")
        return self._as_float(key, value, lo, hi, positive)

    def opt_number(
        self,
        key: str,
        default: float | None = None,
        lo: float | None = None,
        hi: float | None = None,
        positive: bool = False,
    ) -> float | None:
        """A finite number or None (null); default when absent."""
        if key not in self.data:
            return default
        value = self.data[key]
        return None if value is None else self._as_float(key, value, lo, hi, positive)

    # -- strings and bools ------------------------------------------------------------------
    def _as_str(self, key: str, value: Any, choices: tuple[str, ...] | None) -> str:
        if not isinstance(value, str):
            raise self.error(key, f"must be a string, got {describe(value)}")
        if choices is not None and value not in choices:
            raise self.error(key, f"unsupported {describe(value)} (expected {', '.join(choices)})")
        return value

    def string(
        self, key: str, default: Any = REQUIRED, choices: tuple[str, ...] | None = None
    ) -> str:
        """A string (one of choices when given); default when absent or null."""
        value = self._given(key, default)
        if value is _ABSENT:
            raise self.error(key, "missing")
        return self._as_str(key, value, choices)

    def opt_string(
        self, key: str, default: str | None = None, choices: tuple[str, ...] | None = None
    ) -> str | None:
        """A string or None (null); default when absent."""
        if key not in self.data:
            return default
        value = self.data[key]
        return None if value is None else self._as_str(key, value, choices)

    def _as_bool(self, key: str, value: Any) -> bool:
        if not isinstance(value, bool):
            raise self.error(key, f"must be true or false, got {describe(value)}")
        return value

    def boolean(self, key: str, default: Any = REQUIRED) -> bool:
        """true or false; default when absent or null."""
        value = self.data.get(key)
        if value is None:
            if default is REQUIRED:
                raise self.error(key, "missing")
            return bool(default)
        return self._as_bool(key, value)

    def opt_boolean(self, key: str, default: bool | None = None) -> bool | None:
        """true, false or None (null); default when absent."""
        if key not in self.data:
            return default
        value = self.data[key]
        return None if value is None else self._as_bool(key, value)

    # -- containers -------------------------------------------------------------------------
    def object(self, key: str) -> Fields | None:
        """A nested object as Fields (None when absent or null)."""
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, dict):
            raise self.error(key, f"must be an object, got {describe(value)}")
        return Fields(value, self.source, f"{self.name(key)}.")

    def array(self, key: str) -> list[Any] | None:
        """A list (None when absent or null); check its items with item_*."""
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, list):
            raise self.error(key, f"must be a list, got {describe(value)}")
        return value

    def item_string(
        self, key: str, index: int, value: Any, choices: tuple[str, ...] | None = None
    ) -> str:
        """Item index of list key as a string (one of choices when given)."""
        return self._as_str(f"{key}[{index}]", value, choices)

    def item_boolean(self, key: str, index: int, value: Any) -> bool:
        """Item index of list key as a bool."""
        return self._as_bool(f"{key}[{index}]", value)


def built(source: str, cls: Callable[..., T], **kwargs: Any) -> T:
    """cls(**kwargs), its ModelFileError (a validated dataclass's) prefixed with source."""
    try:
        return cls(**kwargs)
    except ModelFileError as exc:
        raise ModelFileError(f"{source}: {exc}") from None


def parse_json(text: str | bytes, source: str, limit: int = MAX_JSON_BYTES) -> Any:
    """Parse JSON text; ModelFileError naming source for bad UTF-8, bad JSON, deep nesting."""
    if len(text) > limit:
        raise ModelFileError(f"{source}: larger than {limit} bytes")
    try:
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        return json.loads(text)
    except UnicodeDecodeError as exc:
        raise ModelFileError(f"{source}: not valid UTF-8 (byte {exc.start})") from None
    except RecursionError:
        raise ModelFileError(f"{source}: not valid JSON (nested too deeply)") from None
    except ValueError as exc:  # bad JSON, or an integer of more than 4300 digits
        raise ModelFileError(f"{source}: not valid JSON ({_first_line(exc)})") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text if len(text) <= 120 else text[:117] + "..."


def _read_bytes(path: Path, label: str, limit: int) -> bytes:
    try:
        if path.stat().st_size > limit:
            raise ModelFileError(f"{label}: larger than {limit} bytes")
        return path.read_bytes()
    except FileNotFoundError:
        raise ModelFileError(f"{label}: missing") from None
    except IsADirectoryError:
        raise ModelFileError(f"{label}: is a folder, not a file") from None
    except OSError as exc:
        raise ModelFileError(f"{label}: cannot read ({exc.strerror or exc})") from None


def read_json_file(path: Path, label: str | None = None) -> Any:
    """A JSON file, bounded like parse_json; label names it in errors (default: its name)."""
    label = label or path.name
    return parse_json(_read_bytes(path, label, MAX_JSON_BYTES), label)


def read_text_file(path: Path, label: str | None = None, limit: int = MAX_JSON_BYTES) -> str:
    """A UTF-8 text file; invalid bytes are refused (ModelFileError naming the offset)."""
    label = label or path.name
    data = _read_bytes(path, label, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ModelFileError(f"{label}: not valid UTF-8 (byte {exc.start})") from None
