"""Embedding request bodies -> one validated EmbedRequest: OpenAI's /v1/embeddings, Ollama's
/api/embed and its legacy /api/embeddings. Every field is served or refused by name (400, the
status of both APIs for a bad request); nothing is accepted and ignored.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ember.app.server.errors import RequestInvalid, model_name
from ember.engine.embedding import EmbeddingInput

if TYPE_CHECKING:
    import numpy as np

MAX_INPUTS = 2048  # OpenAI's limit on inputs per request
# `user` is OpenAI's end-user id for the provider's abuse monitoring: a local server has none,
# so the field has nothing to change (the chat route takes it the same way)
OPENAI_FIELDS = frozenset({"model", "input", "encoding_format", "dimensions", "user"})
OLLAMA_FIELDS = frozenset({"model", "input", "truncate", "options", "keep_alive", "dimensions"})
LEGACY_FIELDS = frozenset({"model", "prompt", "options", "keep_alive"})


@dataclass(frozen=True)
class EmbedRequest:
    """What a client asked to embed, and how it wants the vectors."""

    model: str | None
    inputs: tuple[EmbeddingInput, ...]
    dimensions: int | None = None  # must equal the model's (Ember does not shorten vectors)
    base64: bool = False  # OpenAI encoding_format "base64": little-endian float32 bytes
    truncate: bool = False  # cut an input at the model's context instead of refusing it
    normalize: bool = True  # L2 (OpenAI, /api/embed); the legacy route gives raw vectors
    keep_alive_s: float | None = None

    def __post_init__(self) -> None:
        if not 0 < len(self.inputs) <= MAX_INPUTS:
            raise RequestInvalid("input", f"must hold 1..{MAX_INPUTS} inputs")


def _object(body: Any, status: int) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise RequestInvalid("body", "must be a JSON object", status=status)
    return body


def _refuse_unknown(body: dict[str, Any], known: frozenset[str], status: int) -> None:
    for key in body:
        if key not in known:
            raise RequestInvalid(str(key)[:64], "is not supported by this server", status=status)


def _model(body: dict[str, Any], status: int) -> str | None:
    return model_name(body.get("model"), status)


def _dimensions(body: dict[str, Any], status: int) -> int | None:
    value = body.get("dimensions")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise RequestInvalid("dimensions", "must be a positive integer", status=status)
    return value


def _token_list(value: list[Any], param: str, status: int) -> list[int]:
    if not value or not all(isinstance(t, int) and not isinstance(t, bool) for t in value):
        raise RequestInvalid(param, "must be a non-empty list of token ids", status=status)
    return value


def _inputs(value: Any, param: str, status: int, tokens: bool) -> tuple[EmbeddingInput, ...]:
    """A string, a list of strings, or (tokens) a list of ids or of id lists."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value:
        kinds = "a string, a list of strings or token ids" if tokens else "a string or a list"
        raise RequestInvalid(param, f"must be {kinds} (non-empty)", status=status)
    if len(value) > MAX_INPUTS:
        raise RequestInvalid(param, f"has {len(value)} inputs; at most {MAX_INPUTS}", status=status)
    if tokens and all(isinstance(t, int) and not isinstance(t, bool) for t in value):
        return (value,)  # one input given as token ids
    out: list[EmbeddingInput] = []
    for i, item in enumerate(value):
        if isinstance(item, str) and item:
            out.append(item)
        elif tokens and isinstance(item, list):
            out.append(_token_list(item, f"{param}[{i}]", status))
        else:
            what = "a non-empty string or a list of token ids" if tokens else "a non-empty string"
            raise RequestInvalid(f"{param}[{i}]", f"must be {what}", status=status)
    return tuple(out)


def parse_openai(body: Any) -> EmbedRequest:
    """POST /v1/embeddings."""
    body = _object(body, 400)
    _refuse_unknown(body, OPENAI_FIELDS, 400)
    if "input" not in body:
        raise RequestInvalid("input", "is required")
    encoding = body.get("encoding_format", "float")
    if encoding not in ("float", "base64"):
        raise RequestInvalid("encoding_format", 'must be "float" or "base64"')
    user = body.get("user")
    if user is not None and not isinstance(user, str):
        raise RequestInvalid("user", "must be a string")
    return EmbedRequest(
        model=_model(body, 400),
        inputs=_inputs(body["input"], "input", 400, tokens=True),
        dimensions=_dimensions(body, 400),
        base64=encoding == "base64",
    )


def _no_options(body: dict[str, Any]) -> None:
    """Ollama's options are sampling and context settings; an embedding uses none of them."""
    options = body.get("options")
    if options is None:
        return
    if not isinstance(options, dict):
        raise RequestInvalid("options", "must be an object", status=400)
    for key, value in options.items():
        if value is not None:
            raise RequestInvalid(f"options.{key}"[:64], "does not apply to embeddings", status=400)


def parse_ollama(body: Any, legacy: bool = False) -> EmbedRequest:
    """POST /api/embed (legacy: /api/embeddings with one `prompt`, raw vectors)."""
    from ember.app.server.durations import keep_alive_s

    body = _object(body, 400)
    _refuse_unknown(body, LEGACY_FIELDS if legacy else OLLAMA_FIELDS, 400)
    _no_options(body)
    keep = keep_alive_s(body.get("keep_alive"))
    if legacy:
        prompt = body.get("prompt")
        if not isinstance(prompt, str) or not prompt:
            raise RequestInvalid("prompt", "must be a non-empty string", status=400)
        return EmbedRequest(_model(body, 400), (prompt,), normalize=False, keep_alive_s=keep)
    if "input" not in body:
        raise RequestInvalid("input", "is required", status=400)
    truncate = body.get("truncate", True)
    if not isinstance(truncate, bool):
        raise RequestInvalid("truncate", "must be true or false", status=400)
    return EmbedRequest(
        model=_model(body, 400),
        inputs=_inputs(body["input"], "input", 400, tokens=False),
        dimensions=_dimensions(body, 400),
        truncate=truncate,
        keep_alive_s=keep,
    )


def encode_base64(vector: np.ndarray) -> str:
    """OpenAI's base64 encoding: the float32 values' little-endian bytes."""
    return base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
