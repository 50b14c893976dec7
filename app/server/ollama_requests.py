"""Ollama API requests: /api/chat and /api/generate bodies as engine requests.

`options` map onto SamplingParams (num_predict, temperature, top_k, top_p, min_p,
repeat_penalty, repeat_last_n, presence/frequency_penalty, seed, stop; num_ctx up to the
server's --ctx); `format` "json" or a JSON schema is a constraint; `keep_alive` is seconds or a
duration. Anything else is a 400 naming the field (Ollama's status for bad requests).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from ember.app.parameters import PARAMETERS, VIEWS, ParameterInvalid, check_field
from ember.app.server import chat_fields, logprob_fields
from ember.app.server.durations import keep_alive_s
from ember.app.server.errors import RequestInvalid, model_name
from ember.engine.api import ChatMessage, ConstraintSpec, GenerationRequest, SamplingParams
from ember.engine.errors import EngineError
from ember.models.text.tool_calls import ToolCall

MAX_STOP = 16  # the engine's limit (engine/api.py SamplingParams)
# Ollama's option name -> (the parameter, its type): the table's Ollama view
OPTIONS = {v.field: (name, PARAMETERS[name].kind) for name, v in VIEWS["ollama"].items()}
CHAT_FIELDS = {"model", "messages", "stream", "format", "options", "tools", "keep_alive", "think"}
GENERATE_FIELDS = {"model", "prompt", "system", "raw", "stream", "format", "options", "keep_alive"}
CHAT_FIELDS |= {"logprobs", "top_logprobs"}  # app/server/logprob_fields.py
GENERATE_FIELDS |= {"logprobs", "top_logprobs", "suffix", "images"}  # suffix: fill-in-the-middle
GENERATE_FIELDS |= {"context"}  # the token ids a previous /api/generate returned
MAX_CONTEXT_IDS = 1 << 20  # before the model's own bound (its context size: ollama.py)
# Ollama's documented options that Ember's engine has no use for: accepted and logged, as Ollama
# accepts them for every model (runtime placement, or samplers Ember does not have)
IGNORED_OPTIONS = frozenset(
    {
        "num_keep", "typical_p", "penalize_newline", "numa", "num_batch", "num_gpu", "main_gpu",
        "low_vram", "use_mmap", "use_mlock", "num_thread", "vocab_only", "f16_kv", "mirostat",
        "mirostat_tau", "mirostat_eta", "tfs_z",
    }
)  # fmt: skip
log = logging.getLogger("ember.server")


def _refuse_unknown(body: dict[str, Any], known: set[str]) -> None:
    for key in body:
        if key not in known:
            raise RequestInvalid(str(key)[:64], "is not supported by this server", status=400)


def _in_range(name: str, value: Any) -> Any:
    """value, inside the Ollama view of name's range (app/parameters: the engine's, as Ollama
    documents none); num_predict's -1 and -2 and its --ctx cap are sampling()'s own."""
    if name == "max_tokens":
        return value
    try:
        return check_field("ollama", name, value, prefix="options.")
    except ParameterInvalid as exc:
        raise RequestInvalid(exc.field, exc.reason, status=400) from None


def sampling(options: Any, cap: int, body: dict[str, Any] | None = None) -> SamplingParams:
    """Ollama's options (and body's logprobs fields) as SamplingParams (400 naming an unknown or
    out-of-range option)."""
    if options is None:
        options = {}
    if not isinstance(options, dict):
        raise RequestInvalid("options", "must be an object", status=400)
    fields: dict[str, Any] = {"max_tokens": min(256, cap)}
    if body is not None:
        fields["logprobs"], fields["top_logprobs"] = logprob_fields.parse(body, True, 400)
    for key, value in options.items():
        if key == "stop":
            if not isinstance(value, list) or not all(isinstance(s, str) and s for s in value):
                raise RequestInvalid("options.stop", "must be a list of strings", status=400)
            if len(value) > MAX_STOP:  # refused, never cut: a dropped stop would be ignored
                raise RequestInvalid("options.stop", f"at most {MAX_STOP} strings", status=400)
            fields["stop"] = tuple(value)
        elif key == "num_ctx":
            if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= cap:
                raise RequestInvalid("options.num_ctx", f"must be 1..{cap} (--ctx)", status=400)
        elif key in IGNORED_OPTIONS:
            log.warning(
                "ollama option %s=%.40r does not apply to Ember's engine: ignored", key, value
            )
        elif key in OPTIONS:
            name, kind = OPTIONS[key]
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise RequestInvalid(f"options.{key}", "must be a number", status=400)
            if kind is int and not float(value).is_integer():
                raise RequestInvalid(f"options.{key}", "must be an integer", status=400)
            fields[name] = _in_range(name, kind(value))
        else:
            raise RequestInvalid(f"options.{key}", "is not supported by this server", status=400)
    if fields["max_tokens"] in (-1, -2):  # Ollama: unlimited / fill the context
        fields["max_tokens"] = cap
    if not 1 <= fields["max_tokens"] <= cap:
        raise RequestInvalid("options.num_predict", f"must be 1..{cap} or -1", status=400)
    try:
        return SamplingParams(**fields)
    except EngineError as exc:
        raise RequestInvalid("options", str(exc), status=400) from None


def constraint(value: Any) -> ConstraintSpec | None:
    """`format`: "json" (any JSON object) or a JSON schema."""
    if value in (None, ""):
        return None
    if value == "json":
        return ConstraintSpec("json_object")
    if isinstance(value, dict):
        chat_fields.check_schema(value, "format", status=400)
        return ConstraintSpec("json_schema", json.dumps(value))
    raise RequestInvalid("format", 'must be "json" or a JSON schema object', status=400)


def _no_images(value: Any, param: str) -> None:
    """images: [] (what clients such as litellm always send) passes; an image is refused."""
    if value is None or value == []:
        return
    if not isinstance(value, list):
        raise RequestInvalid(param, "must be a list", status=400)
    raise RequestInvalid(
        param, "Ember's engine reads text only: no model here sees images", status=400
    )


def _messages(raw: Any) -> tuple[ChatMessage, ...]:
    if not isinstance(raw, list):
        raise RequestInvalid("messages", "must be a list", status=400)
    out = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            raise RequestInvalid(f"messages[{i}]", "must be an object", status=400)
        _no_images(item.get("images"), f"messages[{i}].images")
        role, content = item.get("role"), item.get("content") or ""
        if role not in ("system", "user", "assistant", "tool") or not isinstance(content, str):
            raise RequestInvalid(f"messages[{i}]", "needs a role and text content", status=400)
        name = item.get("tool_name") or item.get("name") or ""
        if not isinstance(name, str):
            raise RequestInvalid(f"messages[{i}].tool_name", "must be a string", status=400)
        calls = _tool_calls(item.get("tool_calls"), i)
        thinking = item.get("thinking") if role == "assistant" else None
        if thinking is not None and not isinstance(thinking, str):
            raise RequestInvalid(f"messages[{i}].thinking", "must be a string", status=400)
        out.append(ChatMessage(role, content, tool_calls=calls, name=name, reasoning=thinking or ""))
    return tuple(out)


def _tool_calls(raw: Any, index: int) -> tuple[ToolCall, ...]:
    """An assistant message's tool_calls: a list of {"function": {"name", "arguments"}}."""
    if raw is None:
        return ()
    param = f"messages[{index}].tool_calls"
    if not isinstance(raw, list) or len(raw) > chat_fields.MAX_TOOLS:
        raise RequestInvalid(param, f"must be a list of at most {chat_fields.MAX_TOOLS}", 400)
    calls = []
    for j, call in enumerate(raw):
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise RequestInvalid(f"{param}[{j}].function", "needs a name", status=400)
        args = fn.get("arguments", {})
        if not isinstance(args, dict | str):
            raise RequestInvalid(f"{param}[{j}].function.arguments", "must be an object", 400)
        calls.append(ToolCall(fn["name"], args if isinstance(args, str) else json.dumps(args)))
    return tuple(calls)


def parse_chat(body: Any, cap: int) -> tuple[str | None, bool, float | None, GenerationRequest]:
    if not isinstance(body, dict):
        raise RequestInvalid("body", "must be a JSON object", status=400)
    _refuse_unknown(body, CHAT_FIELDS)
    tools, _ = chat_fields.parse_tools({"tools": body.get("tools")})
    kwargs = {} if body.get("think") is None else {"enable_thinking": bool(body["think"])}
    request = _request(
        messages=_messages(body.get("messages")),
        sampling=sampling(body.get("options"), cap, body),
        constraint=constraint(body.get("format")),
        tools=tools,
        template_kwargs=kwargs,
    )
    return _model(body), _stream(body), keep_alive_s(body.get("keep_alive")), request


def parse_generate(
    body: Any, cap: int
) -> tuple[str | None, bool, float | None, GenerationRequest | None]:
    if not isinstance(body, dict):
        raise RequestInvalid("body", "must be a JSON object", status=400)
    _refuse_unknown(body, GENERATE_FIELDS)
    prompt, system = body.get("prompt") or "", body.get("system") or ""
    if not isinstance(prompt, str) or not isinstance(system, str):
        raise RequestInvalid("prompt", "must be a string", status=400)
    keep = keep_alive_s(body.get("keep_alive"))
    _no_images(body.get("images"), "images")
    context = _context(body.get("context"))
    if not prompt:  # Ollama: an empty prompt only loads (or, with keep_alive 0, unloads)
        if context:
            raise RequestInvalid(
                "context", "needs a prompt to continue with (an empty prompt only loads)", 400
            )
        return _model(body), False, keep, None
    options = sampling(body.get("options"), cap, body)
    spec = constraint(body.get("format"))
    suffix = body.get("suffix")
    if suffix is not None and suffix != "":  # the engine's FIM path, as /infill
        if not isinstance(suffix, str) or system:
            raise RequestInvalid(
                "suffix", "must be a string (and comes without system)", status=400
            )
        if context:
            raise RequestInvalid("context", "a fill-in-the-middle prompt continues nothing", 400)
        request = _request(prompt=prompt, suffix=suffix, sampling=options, constraint=spec)
    elif _flag(body, "raw"):
        text = f"{system}\n\n{prompt}" if system else prompt
        request = _request(prompt=text, sampling=options, constraint=spec, context_ids=context)
    else:
        turns = ((ChatMessage("system", system),) if system else ()) + (
            ChatMessage("user", prompt),
        )
        request = _request(messages=turns, sampling=options, constraint=spec, context_ids=context)
    return _model(body), _stream(body), keep, request


def _flag(body: dict[str, Any], key: str) -> bool:
    value = body.get(key)
    if value is not None and not isinstance(value, bool):
        raise RequestInvalid(key, "must be a boolean", status=400)
    return bool(value)


def _context(value: Any) -> tuple[int, ...]:
    """`context`: the token ids a previous /api/generate returned (checked against the model's
    vocabulary and context size once it is loaded: ollama.py)."""
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) > MAX_CONTEXT_IDS:
        raise RequestInvalid(
            "context", f"must be a list of at most {MAX_CONTEXT_IDS} token ids", 400
        )
    for i, token in enumerate(value):
        if isinstance(token, bool) or not isinstance(token, int) or token < 0:
            raise RequestInvalid(f"context[{i}]", "must be a token id (an integer >= 0)", 400)
    return tuple(value)


def _request(**fields: Any) -> GenerationRequest:
    try:
        return GenerationRequest(**fields)
    except EngineError as exc:
        raise RequestInvalid("messages", str(exc), status=400) from None


def _model(body: dict[str, Any]) -> str | None:
    model = body.get("model")
    if model is None:  # Ollama needs it on every request (no server default)
        raise RequestInvalid("model", "is required", status=400)
    return model_name(model, status=400)


def _stream(body: dict[str, Any]) -> bool:
    value = body.get("stream", True)
    if not isinstance(value, bool):
        raise RequestInvalid("stream", "must be a boolean", status=400)
    return value
