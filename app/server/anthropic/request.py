"""A /v1/messages (or count_tokens) body -> the engine's GenerationRequest, checked field by
field; any field Anthropic does not define, or Ember does not serve, is a 400 naming it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ember.app.server.anthropic.messages import conversation
from ember.app.server.anthropic.tools import parse_tool_choice, parse_tools
from ember.app.server.errors import RequestInvalid
from ember.app.server.schema import parse_sampling
from ember.engine.api import GenerationRequest, SamplingParams
from ember.engine.errors import EngineError

COUNT_FIELDS = frozenset({"model", "messages", "system", "tools", "tool_choice", "thinking"})
# metadata.user_id is checked and has no use here: one local server keeps no per-user state
FIELDS = COUNT_FIELDS | {
    "max_tokens", "stop_sequences", "stream", "temperature", "top_p", "top_k", "metadata",
}  # fmt: skip
MIN_THINKING_BUDGET = 1024  # Anthropic's floor for budget_tokens


@dataclass(frozen=True)
class MessagesRequest:
    """A checked body: the engine request and what shaping the reply needs."""

    model: str | None
    stream: bool
    request: GenerationRequest
    single_call: bool = False  # tool_choice.disable_parallel_tool_use
    image_param: str = ""  # the first image block's field ("" when none)


def _check_fields(body: Any, known: frozenset[str]) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise RequestInvalid("body", "must be a JSON object", status=400)
    for key in body:
        if key not in known:
            raise RequestInvalid(str(key)[:64], "is not a field of this request", status=400)
    model = body.get("model")
    if model is not None and (not isinstance(model, str) or not 0 < len(model) <= 512):
        raise RequestInvalid("model", "must be a non-empty string", status=400)
    return body


def _thinking(value: Any, max_tokens: int | None) -> dict[str, bool]:
    """thinking -> the chat template's reasoning switch (enable_thinking, as Qwen3's reads it);
    Anthropic's default is no thinking."""
    if value is None:
        return {"enable_thinking": False}
    if not isinstance(value, dict) or value.get("type") not in ("enabled", "disabled"):
        raise RequestInvalid("thinking.type", "must be enabled or disabled", status=400)
    if value["type"] == "disabled":
        return {"enable_thinking": False}
    budget = value.get("budget_tokens")
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < MIN_THINKING_BUDGET:
        raise RequestInvalid(
            "thinking.budget_tokens", f"must be an integer >= {MIN_THINKING_BUDGET}", status=400
        )
    if max_tokens is not None and budget >= max_tokens:
        raise RequestInvalid("thinking.budget_tokens", "must be less than max_tokens", status=400)
    return {"enable_thinking": True}


def _sampling(body: dict[str, Any], max_tokens_cap: int) -> SamplingParams:
    """Anthropic's fields, in its ranges, through the one sampling builder (schema.py)."""
    if "max_tokens" not in body:
        raise RequestInvalid("max_tokens", "is required", status=400)
    temperature = body.get("temperature")
    if isinstance(temperature, int | float) and not isinstance(temperature, bool):
        if not 0.0 <= temperature <= 1.0:  # Anthropic's range (OpenAI's goes to 2)
            raise RequestInvalid("temperature", "must be between 0 and 1", status=400)
    metadata = body.get("metadata")
    if metadata is not None and (
        not isinstance(metadata, dict)
        or set(metadata) - {"user_id"}
        or not isinstance(metadata.get("user_id", ""), str | None)
    ):
        raise RequestInvalid("metadata", 'must be {"user_id": string}', status=400)
    names = {"max_tokens": "max_tokens", "temperature": "temperature", "top_p": "top_p",
             "top_k": "top_k", "stop_sequences": "stop"}  # fmt: skip
    fields = {theirs: body[ours] for ours, theirs in names.items() if ours in body}
    try:
        return parse_sampling(fields, max_tokens_cap, chat=True)
    except RequestInvalid as exc:
        param = "stop_sequences" if exc.param == "stop" else exc.param
        raise RequestInvalid(param, exc.reason, status=400) from None


def parse_messages(body: Any, max_tokens_cap: int, count_only: bool = False) -> MessagesRequest:
    """Check a /v1/messages body (count_only: a /v1/messages/count_tokens body)."""
    body = _check_fields(body, COUNT_FIELDS if count_only else FIELDS)
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise RequestInvalid("stream", "must be a boolean", status=400)
    sampling = SamplingParams() if count_only else _sampling(body, max_tokens_cap)
    convo = conversation(body.get("system"), body.get("messages"))
    tools = parse_tools(body.get("tools"))
    choice = parse_tool_choice(body.get("tool_choice"), tools)
    kwargs = _thinking(body.get("thinking"), None if count_only else sampling.max_tokens)
    try:
        request = GenerationRequest(
            messages=tuple(convo.messages),
            sampling=sampling,
            tools=tools,
            tool_choice=choice.engine,
            template_kwargs=kwargs,
        )
    except EngineError as exc:
        raise RequestInvalid("messages", str(exc), status=400) from None
    return MessagesRequest(
        body.get("model"), stream, request, choice.single_call, convo.image_param
    )
