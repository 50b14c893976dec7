"""Client JSON schemas checked and bounded before the compiler (engine/json_schema.py): endless
$ref recursion, depth, size and regex repeats are one-line EngineErrors; numbers without bounds
get 16 integral digits; and any JSON value at all either compiles or is refused in one line
(hypothesis), after which the compiler still compiles the next schema."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ember.engine.api import ConstraintSpec
from ember.engine.constraint import ConstraintCompiler, short_error
from ember.engine.errors import EngineError
from ember.engine.json_schema import MAX_DEPTH, prepare_schema
from ember.engine.runners.fake import FakeTokenizer
from tests.fuzz import FUZZ, nasty_text

pytest.importorskip("llguidance", reason="constrained decoding needs llguidance")


def _deep(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "integer"}
    for _ in range(levels):
        schema = {"type": "array", "items": schema}
    return schema


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        ({"$ref": "#"}, "recurses without end through '#'"),
        ({"type": "object", "properties": {"a": {"$ref": "#"}}, "required": ["a"]}, "recurses"),
        ({"allOf": [{"$ref": "#/$defs/x"}], "$defs": {"x": {"$ref": "#"}}}, "recurses"),
        ({"type": "array", "items": {"$ref": "#"}, "minItems": 1}, "recurses"),
        ({"$ref": "#/$defs/nope"}, "points nowhere"),
        ({"$ref": "https://example.com/s.json"}, "only local"),
        (_deep(MAX_DEPTH), "nested deeper"),
        (_deep(5000), "nested deeper"),
        ({"type": "string", "pattern": "a{1000000}"}, "repeat count"),
        ({"type": "string", "pattern": "x" * 5000}, "pattern longer"),
    ],
)
def test_schemas_without_a_finite_reply_are_refused_in_one_line(
    schema: dict[str, Any], reason: str
) -> None:
    with pytest.raises(EngineError, match=reason) as caught:
        prepare_schema(schema)
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 200


def test_recursion_through_optional_parts_is_allowed() -> None:
    tree = {
        "type": "object",
        "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#"}}},
        "required": ["v"],
    }
    assert prepare_schema(tree)["properties"]["v"]["maximum"] == 10**16 - 2


def test_numbers_get_16_integral_digits_unless_the_schema_bounds_them() -> None:
    out = prepare_schema({"type": "object", "properties": {
        "a": {"type": "integer"}, "b": {"type": ["number", "null"]},
        "c": {"type": "integer", "minimum": 0}, "d": {"type": "integer", "maximum": 10**30},
        "e": {"type": "integer", "enum": [1, 2]}}})  # fmt: skip
    props = out["properties"]
    assert (props["a"]["minimum"], props["a"]["maximum"]) == (-(10**16 - 2), 10**16 - 2)
    assert props["b"]["maximum"] == 10**16 - 2
    assert props["c"]["minimum"] == 0 and props["c"]["maximum"] == 10**16 - 2
    assert props["d"]["maximum"] == 10**30  # the schema allows more: its own bound stands
    assert "maximum" not in props["e"]


def test_the_compiler_refuses_a_17th_digit_and_keeps_the_state_out_of_errors() -> None:
    tokenizer = FakeTokenizer()
    compiler = ConstraintCompiler(tokenizer, tokenizer.vocab_size)
    schema = json.dumps({"type": "integer"})
    constraint = compiler.compile(ConstraintSpec("json_schema", schema))
    digits = tokenizer.encode("1" * 17, parse_special=False)
    assert constraint.count_valid(digits) < len(digits)
    assert short_error("bad thing\n<state>\nTokens: ...") == "bad thing"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(1 << 70), 1 << 70) | st.floats() | nasty_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(nasty_text, inner, max_size=3),
    max_leaves=10,
)
keywords = st.sampled_from(["type", "properties", "required", "items", "$ref", "allOf", "anyOf",
                            "minItems", "maxItems", "pattern", "enum", "$defs", "minimum"])  # fmt: skip
schemas = st.recursive(
    st.sampled_from([{"type": t} for t in ("integer", "number", "string", "object", "array")])
    | st.just({"$ref": "#"}),
    lambda inner: st.dictionaries(keywords, inner | json_values, max_size=4),
    max_leaves=12,
)


@settings(FUZZ, max_examples=120)
@given(schema=schemas | json_values)
def test_any_schema_compiles_or_is_refused_in_one_line(schema: Any) -> None:
    tokenizer = FakeTokenizer()
    compiler = ConstraintCompiler(tokenizer, tokenizer.vocab_size)
    try:
        compiler.compile(ConstraintSpec("json_schema", json.dumps(schema)))
    except EngineError as exc:
        assert "\n" not in str(exc) and "<state>" not in str(exc)
    ok = compiler.compile(ConstraintSpec("json_schema", '{"type": "integer"}'))
    assert ok.count_valid(tokenizer.encode("12", parse_special=False)) == 2
