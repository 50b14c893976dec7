"""Fuzz /v1/messages: any body gets a 200 or a 4xx in Anthropic's error shape naming a field,
never a 5xx, and the engine behind the real app (an EngineThread over the fake runner) stays
healthy."""

from __future__ import annotations

from base64 import b64encode
from typing import Any

import httpx
from hypothesis import given, settings
from hypothesis import strategies as st

from ember.app.server.anthropic.request import COUNT_FIELDS
from tests.app.server.test_fuzz_bodies import _healthy, _post, http, json_values, nasty_text, server
from tests.fuzz import FUZZ

__all__ = ["http", "server"]  # the module's fixtures, shared

block = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": nasty_text}),
    st.fixed_dictionaries(
        {"type": st.just("tool_use"), "id": nasty_text, "name": nasty_text, "input": json_values}
    ),
    st.fixed_dictionaries(
        {"type": st.just("tool_result"), "tool_use_id": nasty_text, "content": json_values},
        optional={"is_error": json_values},
    ),
    st.fixed_dictionaries(
        {"type": st.sampled_from(["image", "thinking", "document", "video"]), "source": json_values}
    ),
    # thinking blocks sent back: signatures of every shape (signing.py checks them)
    st.fixed_dictionaries(
        {"type": st.sampled_from(["thinking", "redacted_thinking"])},
        optional={
            "thinking": st.one_of(nasty_text, json_values),
            "signature": st.one_of(
                nasty_text, st.binary(max_size=40).map(lambda b: b64encode(b).decode()), json_values
            ),
            "data": json_values,
        },
    ),
    json_values,
)
message = st.fixed_dictionaries(
    {
        "role": st.one_of(st.sampled_from(["user", "assistant"]), json_values),
        "content": st.one_of(nasty_text, st.lists(block, max_size=3), json_values),
    }
)
optional = {
    "system": st.one_of(nasty_text, st.lists(block, max_size=2), json_values),
    "temperature": st.one_of(st.sampled_from([-0.1, 0.0, 1.0, 1.1]), json_values),
    "top_k": st.one_of(st.sampled_from([-1, 0, 5]), json_values),
    "stop_sequences": st.one_of(st.lists(nasty_text, max_size=3), json_values),
    "stream": st.booleans(),
    "tools": st.one_of(
        st.lists(
            st.fixed_dictionaries({"name": nasty_text, "input_schema": json_values}), max_size=2
        ),
        json_values,
    ),
    "tool_choice": st.one_of(
        st.fixed_dictionaries({"type": st.sampled_from(["auto", "any", "tool", "none"])}),
        json_values,
    ),
    "thinking": json_values,
    "output_config": json_values,
    "metadata": json_values,
}
bodies = st.one_of(
    st.fixed_dictionaries(
        {
            "model": st.just("fake"),
            "max_tokens": st.sampled_from([1, 8, 16, 17]),
            "messages": st.lists(message, min_size=1, max_size=3),
        },
        optional=optional,
    ),  # fmt: skip
    json_values,
)


def _check(reply: httpx.Response) -> None:
    assert reply.status_code < 500, reply.text
    if reply.status_code >= 400:
        error = reply.json()
        assert error["type"] == "error" and error["error"]["type"]
        assert error["error"]["message"] and "\n" not in error["error"]["message"]
    elif "text/event-stream" not in reply.headers.get("content-type", ""):
        assert reply.json()["stop_reason"] in (
            "end_turn",
            "max_tokens",
            "stop_sequence",
            "tool_use",
        )


@settings(FUZZ, max_examples=80)
@given(body=bodies)
def test_message_bodies(http: httpx.Client, server: str, body: Any) -> None:
    _check(_post(http, server, body, "/v1/messages"))
    _healthy(http, server)


@settings(FUZZ, max_examples=30)
@given(body=bodies)
def test_count_tokens_bodies(http: httpx.Client, server: str, body: Any) -> None:
    if isinstance(body, dict):  # the fields only /v1/messages takes would refuse it at once
        body = {k: v for k, v in body.items() if k in COUNT_FIELDS}
    reply = _post(http, server, body, "/v1/messages/count_tokens")
    assert reply.status_code < 500, reply.text
    _healthy(http, server)
