"""The parameter table (app/parameters) is the one vocabulary: the settings file, the flags, the
TUI forms, the engine and each server API's view agree with it, and a bad value names its field."""

from __future__ import annotations

import argparse
import dataclasses
import math

import pytest

from ember.app.config import Settings
from ember.app.parameters import (
    PARAMETERS,
    SETTING_NAMES,
    VIEWS,
    Parameter,
    ParameterInvalid,
    Range,
    check_field,
    read_fields,
    view_range,
)
from ember.app.server.errors import RequestInvalid
from ember.app.server.ollama_requests import sampling as ollama_sampling
from ember.app.server.schema import parse_chat
from ember.engine.api import EngineOptions, SamplingParams
from ember.engine.errors import EngineError

ENGINE_FIELDS = {f.name for f in dataclasses.fields(SamplingParams)}
SAMPLING_ROWS = [p for p in PARAMETERS.values() if p.name in ENGINE_FIELDS and p.range]


def test_settings_are_the_tables_setting_rows_with_their_types_and_defaults() -> None:
    fields = [f for f in dataclasses.fields(Settings) if f.name != "extra"]
    assert sorted(f.name for f in fields) == sorted(SETTING_NAMES)
    for f in fields:
        row = PARAMETERS[f.name]
        assert f.type == row.kind.__name__, f.name
        assert f.default == row.default, f.name
        assert row.problem(row.default) is None, f.name  # every default obeys its own rule


def _outside(bounds: Range) -> list[float]:
    """Values just outside (and open ends themselves): the engine must refuse each."""
    below = (
        bounds.low
        if bounds.low_open
        else bounds.low - (1 if bounds.low == int(bounds.low) else 1e-6)
    )
    above = bounds.high if bounds.high_open else bounds.high + 1
    return [below, above]


@pytest.mark.parametrize("row", SAMPLING_ROWS, ids=lambda r: r.name)
def test_the_engine_accepts_exactly_the_tables_range(row: Parameter) -> None:
    """SamplingParams checks the same numbers the flags, settings and TUI check (the engine may
    not import app, so this test is what keeps the two one range)."""
    bounds = row.bounds()
    assert bounds is not None
    cast = row.kind
    inside = [v for v in (bounds.low, bounds.high) if v in bounds]
    inside.append(
        cast((bounds.low + bounds.high) / 2) if cast is int else (bounds.low + bounds.high) / 2
    )
    for value in inside:
        assert row.problem(cast(value)) is None
        SamplingParams(**{row.name: cast(value)})
    for value in _outside(bounds):
        if cast is int and not float(value).is_integer():
            continue
        assert row.problem(cast(value)) is not None, (row.name, value)
        with pytest.raises(EngineError, match=row.name):
            SamplingParams(**{row.name: cast(value)})


def test_kv_cache_has_one_vocabulary_from_flag_to_engine() -> None:
    choices = PARAMETERS["kv_cache"].choices
    assert choices == ("f16", "q8", "q4")
    for name in choices:
        assert EngineOptions(model="m", kv_cache=name).kv_cache == name
    with pytest.raises(EngineError, match="kv_cache"):
        EngineOptions(model="m", kv_cache="int8")


@pytest.mark.parametrize("api", sorted(VIEWS))
def test_each_api_view_lies_inside_the_engine_range(api: str) -> None:
    fields = [v.field for v in VIEWS[api].values()]
    assert len(fields) == len(set(fields))
    for name in VIEWS[api]:
        engine = PARAMETERS[name].bounds()
        assert engine is not None
        own = view_range(api, name)
        assert engine.low <= own.low and own.high <= engine.high, (api, name)


def test_temperature_has_one_engine_range_and_each_api_its_documented_one() -> None:
    assert view_range("openai", "temperature") == Range(0.0, 2.0)
    assert view_range("anthropic", "temperature") == Range(0.0, 1.0)
    assert view_range("ollama", "temperature") == PARAMETERS["temperature"].bounds()
    assert PARAMETERS["temperature"].bounds() == Range(0.0, 10.0)
    with pytest.raises(ParameterInvalid) as caught:
        check_field("anthropic", "temperature", 1.5)
    assert caught.value.field == "temperature"
    assert caught.value.reason == "must be between 0 and 1, got 1.5"


def test_read_fields_names_the_apis_field_and_leaves_engine_defaults_out() -> None:
    assert read_fields("anthropic", ("temperature", "top_k"), {}) == {"temperature": 1.0}
    assert read_fields("anthropic", ("top_k",), {"top_k": 5}) == {"top_k": 5}
    with pytest.raises(ParameterInvalid) as caught:
        read_fields("anthropic", ("top_k",), {"top_k": 2.5})
    assert (caught.value.field, caught.value.reason) == ("top_k", "must be an integer, got float")
    with pytest.raises(ParameterInvalid) as caught:
        read_fields("ollama", ("seed",), {"seed": "7"}, prefix="options.")
    assert str(caught.value) == "options.seed: must be an integer, got str"
    assert not math.isnan(
        read_fields("openai", ("temperature",), {"temperature": 2})["temperature"]
    )


@pytest.mark.parametrize(
    ("body", "param", "reason"),
    [
        ({"temperature": 2.5}, "temperature", "must be between 0 and 2, got 2.5"),
        ({"top_p": 0}, "top_p", "must be in (0, 1], got 0"),
        ({"max_completion_tokens": 9999}, "max_completion_tokens", "between 1 and 4096"),
        ({"repetition_penalty": 11}, "repetition_penalty", "between 0.01 and 10"),
    ],
)
def test_the_openai_schema_checks_its_view(
    body: dict[str, object], param: str, reason: str
) -> None:
    body = {"messages": [{"role": "user", "content": "hi"}]} | body
    with pytest.raises(RequestInvalid) as caught:
        parse_chat(body, max_tokens_cap=4096)
    assert caught.value.param == param and reason in str(caught.value)


def test_ollama_options_use_the_engine_range_and_name_the_option() -> None:
    assert ollama_sampling({"temperature": 5}, 4096).temperature == 5.0  # inside [0, 10]
    with pytest.raises(RequestInvalid) as caught:
        ollama_sampling({"temperature": 11}, 4096)
    assert caught.value.param == "options.temperature" and caught.value.status == 400
    with pytest.raises(RequestInvalid) as caught:
        ollama_sampling({"repeat_last_n": -5}, 4096)
    assert caught.value.param == "options.repeat_last_n"


def test_the_sampling_flags_are_built_from_the_table() -> None:
    from ember.app.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    run = sub.choices["run"]
    actions = {a.dest: a for a in run._actions}
    for name in ("temperature", "top_k", "max_tokens", "dry_multiplier", "kv_cache", "draft"):
        row = PARAMETERS[name]
        assert actions[name].help is not None and actions[name].help.startswith(row.help)
    assert actions["temperature"].type is float and actions["top_k"].type is int
    args = run.parse_args(["m", "--temperature", "0.5"])
    assert args.temperature == 0.5 and args.top_k is None  # not given: the settings apply
