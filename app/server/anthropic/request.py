"""A /v1/messages (or count_tokens) body -> the engine's GenerationRequest, checked field by
field; any field Anthropic does not define, or Ember does not serve, is a 400 naming it."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ember.app.parameters import ParameterInvalid, check_field, read_fields
from ember.app.server.anthropic.blocks import depth_check
from ember.app.server.anthropic.messages import conversation
from ember.app.server.anthropic.signing import ThinkingSigner
from ember.app.server.anthropic.tools import parse_tool_choice, parse_tools
from ember.app.server.chat_fields import schema_text
from ember.app.server.errors import RequestInvalid
from ember.app.server.schema import MAX_STOP, MAX_STOP_CHARS
from ember.engine.api import ConstraintSpec, GenerationRequest, SamplingParams
from ember.engine.errors import EngineError

# cache_control (top level, as on blocks): Ember caches every prompt prefix by itself
COUNT_FIELDS = frozenset(
    {"model", "messages", "system", "tools", "tool_choice", "thinking", "output_config",
     "cache_control"}
)  # fmt: skip
# metadata.user_id is checked and has no use here: one local server keeps no per-user state
FIELDS = COUNT_FIELDS | {
    "max_tokens", "stop_sequences", "stream", "temperature", "top_p", "top_k", "metadata",
}  # fmt: skip
EFFORTS = ("low", "medium", "high", "xhigh", "max")
MIN_THINKING_BUDGET = 1024  # Anthropic's floor for budget_tokens


@dataclass(frozen=True)
class MessagesRequest:
    """A checked body: the engine request and what shaping the reply needs."""

    model: str | None
    stream: bool
    request: GenerationRequest
    single_call: bool = False  # tool_choice.disable_parallel_tool_use
    image_param: str = ""  # the first image block's field ("" when none)
    thinking: bool | None = None  # the reasoning switch asked for (None: the model's default)

    def for_model(self, thinking_switch: bool) -> GenerationRequest:
        """The engine request for a model with or without a reasoning switch (enable_thinking,
        as Qwen3's template reads it). Without one the switch is not passed: template kwargs
        would take a base model off its chat scaffold, and such a model's template has no
        switch to turn; its <think> text, if any, still comes back as thinking blocks."""
        if self.thinking is None or not thinking_switch:
            return self.request
        return replace(self.request, template_kwargs={"enable_thinking": self.thinking})


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


def _thinking(
    value: Any, effort: str | None, max_tokens: int | None
) -> tuple[bool | None, int | None]:
    """thinking -> the model's reasoning switch (None: the model's own default) and the
    engine's reasoning budget (None: unlimited): enabled turns the switch on and its
    budget_tokens bound the <think> block (the engine forces </think> once they are spent);
    between_tools turns it on, disabled off, adaptive leaves it to the model; with no thinking,
    output_config.effort decides (low: off, higher: on), else it is off, as Anthropic's is."""
    if value is None:
        return effort not in (None, "low"), None
    kinds = ("enabled", "disabled", "adaptive", "between_tools")
    if not isinstance(value, dict) or value.get("type") not in kinds:
        raise RequestInvalid("thinking.type", f"must be one of {', '.join(kinds)}", status=400)
    known = {"enabled": {"type", "budget_tokens"}, "adaptive": {"type", "display"}}
    for key in value:
        if key not in known.get(value["type"], {"type"}):
            raise RequestInvalid(f"thinking.{str(key)[:40]}", "is not a field here", status=400)
    if value.get("display") not in (None, "summarized"):  # "omitted" would need signatures
        raise RequestInvalid("thinking.display", "only summarized is served", status=400)
    if value["type"] != "enabled":
        return (None if value["type"] == "adaptive" else value["type"] == "between_tools"), None
    budget = value.get("budget_tokens")
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < MIN_THINKING_BUDGET:
        raise RequestInvalid(
            "thinking.budget_tokens", f"must be an integer >= {MIN_THINKING_BUDGET}", status=400
        )
    if max_tokens is not None and budget >= max_tokens:
        raise RequestInvalid("thinking.budget_tokens", "must be less than max_tokens", status=400)
    return True, budget


def _stop_sequences(body: dict[str, Any]) -> tuple[str, ...]:
    value = body.get("stop_sequences", [])
    if (
        not isinstance(value, list)
        or len(value) > MAX_STOP
        or not all(isinstance(s, str) and 0 < len(s) <= MAX_STOP_CHARS for s in value)
    ):
        raise RequestInvalid(
            "stop_sequences", f"at most {MAX_STOP} non-empty strings of <= {MAX_STOP_CHARS}", 400
        )
    return tuple(value)


def _metadata(value: Any) -> None:
    if value is not None and (
        not isinstance(value, dict)
        or set(value) - {"user_id"}
        or not isinstance(value.get("user_id", ""), str | None)
    ):
        raise RequestInvalid("metadata", 'must be {"user_id": string}', status=400)


def _sampling(body: dict[str, Any], max_tokens_cap: int) -> SamplingParams:
    """Anthropic's fields, checked against the Anthropic view of the parameter table
    (app/parameters/views.py: temperature 0..1, default 1)."""
    if "max_tokens" not in body:
        raise RequestInvalid("max_tokens", "is required", status=400)
    _metadata(body.get("metadata"))
    try:
        fields = read_fields("anthropic", ("temperature", "top_p", "top_k"), body)
        cap = max_tokens_cap
        fields["max_tokens"] = check_field("anthropic", "max_tokens", body["max_tokens"], high=cap)
    except ParameterInvalid as exc:
        raise RequestInvalid(exc.field, exc.reason, status=400) from None
    try:
        return SamplingParams(stop=_stop_sequences(body), **fields)
    except EngineError as exc:  # a value the engine cannot take (top_p 0)
        raise RequestInvalid("sampling", str(exc), status=400) from None


def _output_config(value: Any) -> tuple[str | None, ConstraintSpec | None]:
    """output_config: (effort, the reply's JSON schema enforced by the constraint engine)."""
    if value is None:
        return None, None
    if not isinstance(value, dict) or set(value) - {"effort", "format"}:
        raise RequestInvalid("output_config", "must be {effort?, format?}", status=400)
    effort = value.get("effort")
    if effort is not None and effort not in EFFORTS:
        raise RequestInvalid("output_config.effort", f"must be one of {', '.join(EFFORTS)}", 400)
    fmt = value.get("format")
    if fmt is None:
        return effort, None
    if (
        not isinstance(fmt, dict)
        or fmt.get("type") != "json_schema"
        or set(fmt) != {"type", "schema"}
    ):
        raise RequestInvalid(
            "output_config.format", 'must be {"type": "json_schema", "schema"}', 400
        )
    depth_check(fmt["schema"], "output_config.format.schema")
    try:
        text = schema_text(fmt["schema"], "output_config.format.schema")
    except RequestInvalid as exc:
        raise RequestInvalid(exc.param, exc.reason, status=400) from None
    return effort, ConstraintSpec("json_schema", text)


def _cache_control(value: Any) -> None:
    if value is None:
        return
    if (
        not isinstance(value, dict)
        or value.get("type") != "ephemeral"
        or set(value) - {"type", "ttl"}
    ):
        raise RequestInvalid("cache_control", 'must be {"type": "ephemeral", "ttl"?}', status=400)


def parse_messages(
    body: Any, max_tokens_cap: int, signer: ThinkingSigner, count_only: bool = False
) -> MessagesRequest:
    """Check a /v1/messages body (count_only: a /v1/messages/count_tokens body); signer checks
    the thinking blocks of earlier turns."""
    body = _check_fields(body, COUNT_FIELDS if count_only else FIELDS)
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise RequestInvalid("stream", "must be a boolean", status=400)
    sampling = SamplingParams() if count_only else _sampling(body, max_tokens_cap)
    convo = conversation(body.get("system"), body.get("messages"), signer)
    tools = parse_tools(body.get("tools"))
    choice = parse_tool_choice(body.get("tool_choice"), tools)
    _cache_control(body.get("cache_control"))
    effort, constraint = _output_config(body.get("output_config"))
    max_tokens = None if count_only else sampling.max_tokens
    thinking, budget = _thinking(body.get("thinking"), effort, max_tokens)
    try:
        request = GenerationRequest(
            messages=tuple(convo.messages),
            sampling=replace(sampling, reasoning_budget=budget),
            constraint=constraint,
            tools=tools,
            tool_choice=choice.engine,
        )
    except EngineError as exc:  # e.g. a forced tool call beside output_config.format
        raise RequestInvalid("request", str(exc), status=400) from None
    return MessagesRequest(
        body.get("model"), stream, request, choice.single_call, convo.image_param, thinking
    )
