"""`ember run --reasoning-budget N`: the table's row becomes the flag, the flag reaches the
engine request's SamplingParams, and a bad value is a one-line error naming the flag."""

from __future__ import annotations

import pytest

from ember.app.cli import build_parser
from ember.app.commands.run import _request
from ember.app.config import Settings
from ember.app.errors import ConfigError


def test_the_flag_reaches_the_engine_request() -> None:
    parser = build_parser()
    args = parser.parse_args(["run", "m", "hi", "--reasoning-budget", "64"])
    assert _request(args, "hi", Settings()).sampling.reasoning_budget == 64
    unbounded = parser.parse_args(["run", "m", "hi"])
    assert _request(unbounded, "hi", Settings()).sampling.reasoning_budget is None


def test_a_bad_budget_names_the_flag() -> None:
    args = build_parser().parse_args(["run", "m", "hi", "--reasoning-budget", "-1"])
    with pytest.raises(ConfigError, match=r"^--reasoning-budget -1: must be between 0 and "):
        _request(args, "hi", Settings())
