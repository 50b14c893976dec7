"""Validation of OpenAI-style request bodies into engine requests (400 with a reason on bad input).

Types are checked strictly (a bool is not an int, a string is not a number) and every numeric
parameter is bounded, so nothing the client sends reaches the engine unchecked.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from dataclasses import fields as fields_of
from typing import Any

from ember.app.parameters import ParameterInvalid, check_field, read_field, read_fields, view
from ember.app.server import chat_fields, dry_fields, logprob_fields
from ember.app.server.errors import RequestInvalid
from ember.app.server.logit_bias import parse_logit_bias
from ember.engine.api import ChatMessage, GenerationRequest, SamplingParams
from ember.engine.errors import EngineError

MAX_MESSAGES = 1024
MAX_STOP = 16
MAX_STOP_CHARS = 256
MAX_PROMPT_CHARS = 1 << 20
MAX_CHOICES = 16  # n times the prompts of one request

# read from the body by the OpenAI view of the parameter table
_OPENAI_FIELDS = (
    "temperature", "top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty", "seed",
)  # fmt: skip

__all__ = ["ParsedRequest", "RequestInvalid", "parse_chat", "parse_completion"]


@dataclass(frozen=True)
class ParsedRequest:
    """A validated completion request."""

    model: str | None
    stream: bool
    include_usage: bool
    request: GenerationRequest
    more: tuple[GenerationRequest, ...] = ()  # the other choices (n > 1, or more prompts)
    prompts: int = 1  # how many distinct prompts the choices answer (usage counts each once)

    @property
    def choices(self) -> tuple[GenerationRequest, ...]:
        return (self.request, *self.more)


def _integer(body: dict[str, Any], key: str, lo: int, hi: int, default: int | None) -> int | None:
    value = body.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestInvalid(key, f"must be an integer, got {type(value).__name__}")
    if not lo <= value <= hi:
        raise RequestInvalid(key, f"must be between {lo} and {hi}, got {value}")
    return value


def _stop(body: dict[str, Any]) -> tuple[str, ...]:
    value = body.get("stop")
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(s, str) for s in items):
        raise RequestInvalid("stop", "must be a string or a list of strings")
    if len(items) > MAX_STOP or any(not s or len(s) > MAX_STOP_CHARS for s in items):
        raise RequestInvalid(
            "stop", f"at most {MAX_STOP} non-empty strings of <= {MAX_STOP_CHARS} chars"
        )
    return tuple(items)


def _content(value: Any, index: int) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, list):  # [{"type": "text", "text": "..."}]
        parts = []
        for part in value:
            if (
                not isinstance(part, dict)
                or part.get("type") != "text"
                or not isinstance(part.get("text"), str)
            ):
                raise RequestInvalid(f"messages[{index}].content", "only text parts are supported")
            parts.append(part["text"])
        return "".join(parts)
    raise RequestInvalid(f"messages[{index}].content", "must be a string or a list of text parts")


def _messages(body: dict[str, Any]) -> tuple[ChatMessage, ...]:
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise RequestInvalid("messages", "must be a non-empty list")
    if len(raw) > MAX_MESSAGES:
        raise RequestInvalid("messages", f"at most {MAX_MESSAGES} messages")
    out: list[ChatMessage] = []
    total = 0
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            raise RequestInvalid(f"messages[{i}]", "must be an object")
        role = item.get("role")
        if role == "developer":
            role = "system"
        if role not in ("system", "user", "assistant", "tool"):
            raise RequestInvalid(f"messages[{i}].role", "must be system, user, assistant or tool")
        content = _content(item.get("content"), i)
        total += len(content)
        if role == "tool":
            out.append(chat_fields.tool_message(item, i, content))
            continue
        calls = (
            chat_fields.parse_tool_calls(item.get("tool_calls"), i) if role == "assistant" else ()
        )
        reasoning = chat_fields.reasoning_content(item, i) if role == "assistant" else ""
        total += sum(len(c.arguments) for c in calls) + len(reasoning)
        out.append(ChatMessage(role=role, content=content, tool_calls=calls, reasoning=reasoning))
    if total > MAX_PROMPT_CHARS:
        raise RequestInvalid("messages", f"total content exceeds {MAX_PROMPT_CHARS} characters")
    return tuple(out)


def _stop_token_ids(body: dict[str, Any]) -> tuple[int, ...]:
    value = body.get("stop_token_ids")
    if value is None:
        return ()
    if (
        not isinstance(value, list)
        or len(value) > MAX_STOP
        or not all(
            isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 31 for v in value
        )
    ):
        raise RequestInvalid("stop_token_ids", f"must be a list of at most {MAX_STOP} token ids")
    return tuple(value)


def _ignore_eos(body: dict[str, Any]) -> bool:
    value = body.get("ignore_eos", False)
    if not isinstance(value, bool):
        raise RequestInvalid("ignore_eos", "must be a boolean")
    return value


def _repeat_penalty(body: dict[str, Any]) -> float:
    """llama-server's repeat_penalty, or vLLM's repetition_penalty (one value if both)."""
    ours = read_field("openai", "repeat_penalty", body)
    theirs = body.get("repetition_penalty")
    if theirs is None:
        return float(ours)
    theirs = check_field("openai", "repeat_penalty", theirs, field="repetition_penalty")
    if "repeat_penalty" in body and ours != theirs:
        raise RequestInvalid("repetition_penalty", "differs from repeat_penalty")
    return float(theirs)


def _max_tokens(body: dict[str, Any], max_tokens_cap: int) -> int:
    key = "max_completion_tokens" if "max_completion_tokens" in body else "max_tokens"
    value = body.get(key)
    if value is None:
        return int(view("openai", "max_tokens").default)
    return int(check_field("openai", "max_tokens", value, high=max_tokens_cap, field=key))


def _sampling(body: dict[str, Any], max_tokens_cap: int, chat: bool) -> SamplingParams:
    """The sampling fields, each checked against the OpenAI view of the parameter table
    (app/parameters/views.py), so a bad one is a 400 naming the field."""
    logprobs, top_logprobs = logprob_fields.parse(body, chat)
    try:
        fields = read_fields("openai", _OPENAI_FIELDS, body)
        fields["repeat_penalty"] = _repeat_penalty(body)
        fields["max_tokens"] = _max_tokens(body, max_tokens_cap)
        fields.update(dry_fields.parse_dry(body))
    except ParameterInvalid as exc:
        raise RequestInvalid(exc.field, exc.reason) from None
    fields["logit_bias"], fields["logit_bias_text"] = parse_logit_bias(body)
    return SamplingParams(
        logprobs=logprobs,
        top_logprobs=top_logprobs,
        stop=_stop(body),
        stop_token_ids=_stop_token_ids(body),
        ignore_eos=_ignore_eos(body),
        **fields,
    )


def _common(body: Any) -> tuple[str | None, bool, bool]:
    if not isinstance(body, dict):
        raise RequestInvalid("body", "must be a JSON object")
    chat_fields.refuse_unknown(body)
    model = body.get("model")
    if model is not None and (not isinstance(model, str) or not 0 < len(model) <= 512):
        raise RequestInvalid("model", "must be a non-empty string")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise RequestInvalid("stream", "must be a boolean")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise RequestInvalid("stream_options", "must be an object")
    include_usage = options.get("include_usage", False)
    if not isinstance(include_usage, bool):
        raise RequestInvalid("stream_options.include_usage", "must be a boolean")
    return model, stream, include_usage


def parse_chat(body: Any, max_tokens_cap: int) -> ParsedRequest:
    """Validate a /v1/chat/completions body."""
    model, stream, include_usage = _common(body)
    tools, choice = chat_fields.parse_tools(body)
    if body.get("parallel_tool_calls") not in (None, True, False):
        raise RequestInvalid("parallel_tool_calls", "must be a boolean")
    try:
        request = GenerationRequest(
            messages=_messages(body),
            sampling=_sampling(body, max_tokens_cap, chat=True),
            constraint=chat_fields.parse_response_format(body),
            tools=tools,
            tool_choice=choice,
            template_kwargs=chat_fields.parse_template_kwargs(body),
        )
    except EngineError as exc:
        raise RequestInvalid(_param_of(str(exc)), str(exc)) from None
    return _with_choices(ParsedRequest(model, stream, include_usage, request), [request], body)


def _with_choices(
    parsed: ParsedRequest, per_prompt: list[GenerationRequest], body: dict[str, Any]
) -> ParsedRequest:
    """n choices of each prompt's request, each its own engine request (a seed moves by one
    per choice, so seeded choices differ yet repeat)."""
    n = int(_integer(body, "n", 1, MAX_CHOICES, 1) or 1)
    if n * len(per_prompt) > MAX_CHOICES:
        raise RequestInvalid("n", f"n times the prompts must be at most {MAX_CHOICES}")
    out = []
    for request in per_prompt:
        for i in range(n):
            seed = request.sampling.seed
            sampling = replace(request.sampling, seed=None if seed is None else seed + i)
            fields = {f.name: getattr(request, f.name) for f in fields_of(request)}
            fields |= {"sampling": sampling}
            del fields["request_id"]  # a fresh id for each
            out.append(GenerationRequest(**fields))
    return replace(parsed, request=out[0], more=tuple(out[1:]), prompts=len(per_prompt))


def _param_of(message: str) -> str:
    for param in ("tool_choice", "template_kwargs", "tools", "constraint"):
        if param in message:
            return {"template_kwargs": "chat_template_kwargs", "constraint": "response_format"}.get(
                param, param
            )
    return "messages"


def _token_ids(value: list[Any], param: str) -> tuple[int, ...]:
    if not value or not all(
        isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in value
    ):
        raise RequestInvalid(param, "must be a non-empty list of token ids (integers >= 0)")
    if len(value) > MAX_PROMPT_CHARS:
        raise RequestInvalid(param, f"exceeds {MAX_PROMPT_CHARS} tokens")
    return tuple(value)


def _prompts(value: Any) -> list[str | tuple[int, ...]]:
    """OpenAI's prompt forms: a string, a list of strings, a list of token ids, or a list of such
    lists; one choice (or n) per prompt."""
    if isinstance(value, str) or (isinstance(value, list) and value and isinstance(value[0], int)):
        value = [value]
    if not isinstance(value, list) or not value or len(value) > MAX_CHOICES:
        raise RequestInvalid(
            "prompt", f"must be a string, token ids, or a list of 1..{MAX_CHOICES} of them"
        )
    out: list[str | tuple[int, ...]] = []
    for i, item in enumerate(value):
        param = "prompt" if len(value) == 1 else f"prompt[{i}]"
        if isinstance(item, list):
            out.append(_token_ids(item, param))
        elif not isinstance(item, str) or not item:
            raise RequestInvalid(param, "must be a non-empty string or a list of token ids")
        elif len(item) > MAX_PROMPT_CHARS:
            raise RequestInvalid(param, f"exceeds {MAX_PROMPT_CHARS} characters")
        else:
            out.append(item)
    return out


def parse_completion(body: Any, max_tokens_cap: int) -> ParsedRequest:
    """Validate a /v1/completions body."""
    model, stream, include_usage = _common(body)
    prompts = _prompts(body.get("prompt"))
    for field in ("tools", "tool_choice", "response_format", "chat_template_kwargs"):
        if body.get(field) is not None:
            raise RequestInvalid(field, "is only served by /v1/chat/completions")
    sampling = _sampling(body, max_tokens_cap, chat=False)
    requests = [
        GenerationRequest(prompt=p, sampling=sampling)
        if isinstance(p, str)
        else GenerationRequest(prompt_ids=p, sampling=sampling)
        for p in prompts
    ]
    return _with_choices(ParsedRequest(model, stream, include_usage, requests[0]), requests, body)
