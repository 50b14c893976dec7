"""Every engine finish reason maps onto an OpenAI finish_reason (a missing one would be a 500)."""

from __future__ import annotations

from typing import get_args

from ember.app.server.openai import FINISH
from ember.engine.api import FinishReason


def test_every_engine_reason_has_an_openai_value() -> None:
    assert set(FINISH) == set(get_args(FinishReason))
    assert set(FINISH.values()) <= {"stop", "length", "tool_calls", "content_filter"}
    assert FINISH["loop"] == "length"  # cut short by the loop detector, as README says
