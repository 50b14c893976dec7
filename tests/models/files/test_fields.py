"""Fields (typed reads of metadata) and the bounded JSON / text readers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ember.models.errors import ModelFileError
from ember.models.files.fields import (
    Fields,
    describe,
    parse_json,
    read_json_file,
    read_text_file,
)

DATA = {
    "n": 4,
    "f": 2.5,
    "whole": 4096.0,
    "s": "silu",
    "b": True,
    "null": None,
    "obj": {"inner": "x", "deep": {"k": 1}},
    "items": ["a", 1],
    "nan": float("nan"),
    "inf": float("inf"),
    "huge": 10**40,
    "neg": -3,
    "text_list": ["gelu"],
}
F = Fields(DATA, "m/config.json")


def _fails(fragment: str, read: object, *args: object, **kwargs: object) -> None:
    with pytest.raises(ModelFileError, match=f"^{re.escape(fragment)}") as info:
        read(*args, **kwargs)  # type: ignore[operator]
    assert "\n" not in str(info.value)


def test_typed_values_pass() -> None:
    assert F.integer("n") == 4 and F.integer("whole") == 4096  # an integral float is an int
    assert F.number("n") == 4.0 and isinstance(F.number("n"), float)
    assert F.string("s", choices=("silu", "gelu")) == "silu"
    assert F.boolean("b") is True
    inner = F.object("obj")
    assert inner is not None and inner.string("inner") == "x"
    assert F.array("items") == ["a", 1]


def test_absent_and_null() -> None:
    assert F.integer("missing", 7) == 7 and F.integer("null", 7) == 7  # both mean "not given"
    assert F.opt_integer("missing", 7) == 7 and F.opt_integer("null", 7) is None  # null: off
    assert F.object("null") is None and F.array("missing") is None
    assert F.boolean("missing", False) is False and F.opt_boolean("null") is None
    _fails("m/config.json: missing: missing", F.integer, "missing")
    _fails("m/config.json: null: missing", F.string, "null")


@pytest.mark.parametrize(
    ("read", "key", "kwargs", "message"),
    [
        ("integer", "s", {}, "s: must be an integer, got 'silu'"),
        ("integer", "b", {}, "b: must be an integer, got True"),  # a bool is not an int
        ("integer", "f", {}, "f: must be an integer, got 2.5"),
        ("integer", "neg", {"lo": 1}, "neg: must be in 1..9223372036854775808, got -3"),
        ("integer", "huge", {}, "huge: must be in 0..9223372036854775808, got an integer of 41"),
        ("integer", "obj", {}, "obj: must be an integer, got an object"),
        ("number", "s", {}, "s: must be a number, got 'silu'"),
        ("number", "obj", {}, "obj: must be a number, got an object"),
        ("number", "b", {}, "b: must be a number, got True"),
        ("number", "nan", {}, "nan: must be a finite number, got nan"),
        ("number", "inf", {}, "inf: must be a finite number, got inf"),
        ("number", "huge", {"hi": 1e6}, "huge: must be <= 1e+06, got an integer of 41"),
        ("number", "neg", {"positive": True}, "neg: must be > 0, got -3"),
        ("string", "text_list", {}, "text_list: must be a string, got ['gelu']"),
        ("string", "s", {"choices": ("relu",)}, "s: unsupported 'silu' (expected relu)"),
        ("boolean", "n", {}, "n: must be true or false, got 4"),
        ("object", "items", {}, "items: must be an object, got ['a', 1]"),
        ("array", "obj", {}, "obj: must be a list, got an object"),
    ],
)
def test_wrong_type_or_range_names_file_and_field(
    read: str, key: str, kwargs: dict[str, object], message: str
) -> None:
    _fails(f"m/config.json: {message}", getattr(F, read), key, **kwargs)


def test_nested_fields_carry_their_path() -> None:
    deep = F.object("obj")
    assert deep is not None
    deeper = deep.object("deep")
    assert deeper is not None
    _fails("m/config.json: obj.deep.k: must be a string, got 1", deeper.string, "k")
    _fails("m/config.json: items[1]: must be a string, got 1", F.item_string, "items", 1, 1)


def test_describe_is_short_and_escapes_control_characters() -> None:
    assert describe("a" * 1000).endswith("...") and len(describe("a" * 1000)) == 40
    assert describe("\x1b[31mred\n") == "'\\x1b[31mred\\n'"
    assert describe(list(range(100))) == "a list of 100"
    assert describe([[1]]) == "a list of 1"


def test_json_deep_nesting_huge_numbers_and_bad_bytes() -> None:
    _fails(
        "x.json: not valid JSON (nested too deeply)",
        parse_json,
        "[" * 200_000 + "]" * 200_000,
        "x.json",
    )
    _fails(
        "x.json: not valid JSON (nested too deeply)",
        parse_json,
        '{"a":' * 200_000 + "1" + "}" * 200_000,
        "x.json",
    )
    _fails("x.json: not valid JSON (", parse_json, "[" + "9" * 5000 + "]", "x.json")
    _fails("x.json: not valid UTF-8 (byte 1)", parse_json, b'"\xff"', "x.json")
    _fails("x.json: larger than 10 bytes", parse_json, "[" + " " * 20 + "]", "x.json", limit=10)
    assert parse_json("1e400", "x.json") == float("inf")  # typed reads refuse it later


def test_files(tmp_path: Path) -> None:
    (tmp_path / "t.jinja").write_bytes(b"{{ x }}\xff")
    _fails("m/t.jinja: not valid UTF-8 (byte 7)", read_text_file, tmp_path / "t.jinja", "m/t.jinja")
    _fails("c.json: missing", read_json_file, tmp_path / "c.json")
    _fails("d: is a folder, not a file", read_json_file, tmp_path, "d")
    (tmp_path / "ok.json").write_text('{"a": [1]}')
    assert read_json_file(tmp_path / "ok.json") == {"a": [1]}
