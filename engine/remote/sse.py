"""OpenAI-compatible wire format: request bodies from Ember's types, and streamed SSE chunks.

Kept apart from the HTTP plumbing so both directions unit-test without a server.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ember.engine.api import GenerationRequest, SamplingParams, TokenLogprob
from ember.engine.errors import EngineError
from ember.engine.remote.logprobs import parse_choice_logprobs, request_fields


def sampling_fields(params: SamplingParams) -> dict[str, Any]:
    """OpenAI fields, plus the common extensions (vLLM, llama-server) only when not default."""
    body: dict[str, Any] = {
        "temperature": params.temperature,
        "top_p": params.top_p,
        "max_tokens": params.max_tokens,
    }
    if params.stop:
        body["stop"] = list(params.stop)
    if params.seed is not None:
        body["seed"] = params.seed
    if params.presence_penalty:
        body["presence_penalty"] = params.presence_penalty
    if params.frequency_penalty:
        body["frequency_penalty"] = params.frequency_penalty
    if params.top_k:
        body["top_k"] = params.top_k
    if params.min_p:
        body["min_p"] = params.min_p
    if params.repeat_penalty != 1.0:
        body["repeat_penalty"] = params.repeat_penalty  # llama-server
        body["repetition_penalty"] = params.repeat_penalty  # vLLM, SGLang
    if params.stop_token_ids:
        body["stop_token_ids"] = list(params.stop_token_ids)
    if params.ignore_eos:
        body["ignore_eos"] = True
    if params.dry_multiplier:  # llama-server's (and Ember's) DRY fields
        body["dry_multiplier"] = params.dry_multiplier
        body["dry_base"] = params.dry_base
        body["dry_allowed_length"] = params.dry_allowed_length
        body["dry_penalty_last_n"] = params.dry_penalty_last_n
        body["dry_sequence_breakers"] = list(params.dry_sequence_breakers)
    if params.logit_bias or params.logit_bias_text:
        body["logit_bias"] = _logit_bias(params)
    return body


def _logit_bias(params: SamplingParams) -> dict[str, float] | list[list[Any]]:
    """OpenAI's object form (ids; a ban, -inf here, is OpenAI's -100); llama-server's list
    form when there are texts (the server tokenizes them: Ember has no remote vocabulary)."""
    ids = [(i, max(b, -100.0)) for i, b in params.logit_bias]
    if not params.logit_bias_text:
        return {str(i): b for i, b in ids}
    texts = [(t, max(b, -100.0)) for t, b in params.logit_bias_text]
    return [[key, b] for key, b in [*ids, *texts]]


def request_body(request: GenerationRequest, model: str) -> tuple[str, dict[str, Any]]:
    """(endpoint path, JSON body) for a streamed completion of request."""
    if request.context_ids:  # token ids of an exchange only a local engine can prepend
        raise EngineError("request context_ids: a remote server cannot continue token ids")
    body: dict[str, Any] = {
        "model": model,
        "stream": True,
        "stream_options": {"include_usage": True},
        **sampling_fields(request.sampling),
    }
    body |= request_fields(request.sampling, chat=request.messages is not None)
    if request.messages is not None:
        body["messages"] = [{"role": m.role, "content": m.content} for m in request.messages]
        return "/v1/chat/completions", body
    body["prompt"] = (
        request.prompt if request.prompt is not None else list(request.prompt_ids or ())
    )
    if request.suffix is not None:  # OpenAI's completions field; the server fills the middle
        body["suffix"] = request.suffix
    return "/v1/completions", body


@dataclass(frozen=True)
class Chunk:
    """What one SSE data line carried."""

    text: str = ""
    finish_reason: str | None = None
    usage: dict[str, int] | None = None
    done: bool = False  # the `data: [DONE]` sentinel
    logprobs: tuple[TokenLogprob, ...] = ()


def parse_data(payload: str) -> Chunk:
    """One `data:` payload -> Chunk; EngineError naming the problem when malformed."""
    if payload.strip() == "[DONE]":
        return Chunk(done=True)
    try:
        obj = json.loads(payload)
    except ValueError:
        raise EngineError(f"remote server sent a malformed chunk: {payload[:80]!r}") from None
    if not isinstance(obj, dict):
        raise EngineError(f"remote server sent a malformed chunk: {payload[:80]!r}")
    if "error" in obj:
        error = obj["error"]
        message = error.get("message", error) if isinstance(error, dict) else error
        raise EngineError(f"remote server error mid-stream: {message}")
    usage = obj.get("usage") if isinstance(obj.get("usage"), dict) else None
    choices = obj.get("choices")
    if not isinstance(choices, list):
        raise EngineError(f"remote server sent a chunk without choices: {payload[:80]!r}")
    if not choices:
        return Chunk(usage=usage)
    choice = choices[0]
    if not isinstance(choice, dict):
        raise EngineError(f"remote server sent a malformed choice: {payload[:80]!r}")
    delta = choice.get("delta")
    text = delta.get("content") if isinstance(delta, dict) else choice.get("text")
    if text is not None and not isinstance(text, str):
        raise EngineError(f"remote server sent non-text content: {payload[:80]!r}")
    logprobs = parse_choice_logprobs(choice.get("logprobs"))
    return Chunk(text or "", choice.get("finish_reason"), usage, logprobs=logprobs)


def iter_chunks(lines: Iterable[str]) -> Iterator[Chunk]:
    """SSE lines -> Chunks (comments, event names and blank lines skipped)."""
    for line in lines:
        if line.startswith("data:"):
            yield parse_data(line[5:].strip())
