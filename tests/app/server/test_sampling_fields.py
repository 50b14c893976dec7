"""What the remote runner sends is what the server reads: every sampling field round-trips
(engine/remote/sse.request_body -> app/server/schema.parse_chat), DRY included."""

from __future__ import annotations

import pytest

from ember.app.server.errors import RequestInvalid
from ember.app.server.schema import parse_chat
from ember.engine.api import ChatMessage, GenerationRequest, SamplingParams
from ember.engine.remote.sse import request_body

SAMPLINGS = [
    SamplingParams(temperature=0.0, max_tokens=9),
    SamplingParams(
        temperature=0.7, top_p=0.9, top_k=40, min_p=0.05, repeat_penalty=1.1, seed=7,
        max_tokens=33, stop=("\n\n",), stop_token_ids=(5, 6), ignore_eos=True,
        presence_penalty=0.5, frequency_penalty=0.25,
    ),
    SamplingParams(
        max_tokens=12, dry_multiplier=0.8, dry_base=1.5, dry_allowed_length=3,
        dry_penalty_last_n=256, dry_sequence_breakers=("\n", "."),
    ),
]  # fmt: skip


@pytest.mark.parametrize("sampling", SAMPLINGS)
def test_remote_body_round_trips_through_the_server_schema(sampling: SamplingParams) -> None:
    request = GenerationRequest(messages=(ChatMessage("user", "hi"),), sampling=sampling)
    path, body = request_body(request, "m")
    assert path == "/v1/chat/completions"
    parsed = parse_chat(body, max_tokens_cap=4096).request.sampling
    assert parsed == sampling


@pytest.mark.parametrize(
    ("patch", "param"),
    [
        ({"dry_multiplier": -1}, "dry_multiplier"),
        ({"dry_multiplier": 0.8, "dry_base": 0.5}, "dry_base"),
        ({"dry_allowed_length": 0}, "dry_allowed_length"),
        ({"dry_penalty_last_n": -2}, "dry_penalty_last_n"),
        ({"dry_sequence_breakers": "\n"}, "dry_sequence_breakers"),
        ({"dry_sequence_breakers": [""]}, "dry_sequence_breakers"),
    ],
)
def test_bad_dry_values_name_their_field(patch: dict[str, object], param: str) -> None:
    body = {"messages": [{"role": "user", "content": "hi"}]} | patch
    with pytest.raises(RequestInvalid) as caught:
        parse_chat(body, max_tokens_cap=4096)
    assert caught.value.param == param
