"""Logprobs over the wire to and from an OpenAI-compatible server (engine/remote).

Asking: chat sends `logprobs: true, top_logprobs: N`; a raw prompt (/v1/completions) sends
`logprobs: N`. Reading: each streamed choice's `logprobs`, in the chat shape (content[] with
token, logprob, bytes, top_logprobs) or the legacy one (tokens, token_logprobs, top_logprobs
dicts), becomes TokenLogprobs. A server reports no token ids: token_id is -1 there.
"""

from __future__ import annotations

from typing import Any

from ember.engine.api import SamplingParams, TokenLogprob, TopLogprob
from ember.engine.errors import EngineError

UNKNOWN_ID = -1


def request_fields(params: SamplingParams, chat: bool) -> dict[str, Any]:
    """The body fields that ask the server for params' logprobs (none when off)."""
    if not params.logprobs:
        return {}
    if chat:
        return {"logprobs": True, "top_logprobs": params.top_logprobs}
    if params.top_logprobs > 5:
        raise EngineError(
            f"sampling top_logprobs={params.top_logprobs}: a remote /v1/completions serves at "
            "most 5"
        )
    return {"logprobs": params.top_logprobs}


def _bytes(entry: dict[str, Any]) -> bytes:
    raw = entry.get("bytes")
    if isinstance(raw, list) and all(isinstance(b, int) and 0 <= b < 256 for b in raw):
        return bytes(raw)
    token = entry.get("token")
    if not isinstance(token, str):
        raise EngineError(f"remote server sent a logprob without a token: {str(entry)[:80]!r}")
    return token.encode("utf-8")


def _value(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise EngineError(f"remote server sent a logprob that is not a number: {value!r}")
    return float(value)


def parse_choice_logprobs(block: Any) -> tuple[TokenLogprob, ...]:
    """A streamed choice's `logprobs` (None, chat shape or legacy shape) -> TokenLogprobs."""
    if block is None:
        return ()
    if not isinstance(block, dict):
        raise EngineError(f"remote server sent malformed logprobs: {str(block)[:80]!r}")
    if "content" in block:
        out = []
        for entry in block.get("content") or ():
            if not isinstance(entry, dict):
                raise EngineError(f"remote server sent a malformed logprob: {str(entry)[:80]!r}")
            top = tuple(
                TopLogprob(UNKNOWN_ID, _bytes(t), _value(t.get("logprob")))
                for t in entry.get("top_logprobs") or ()
                if isinstance(t, dict)
            )
            out.append(TokenLogprob(UNKNOWN_ID, _bytes(entry), _value(entry.get("logprob")), top))
        return tuple(out)
    tokens, values = block.get("tokens") or [], block.get("token_logprobs") or []
    tops = block.get("top_logprobs") or [{}] * len(tokens)
    if not (isinstance(tokens, list) and isinstance(values, list) and isinstance(tops, list)):
        raise EngineError(f"remote server sent malformed logprobs: {str(block)[:80]!r}")
    out = []
    for token, value, top in zip(tokens, values, tops, strict=False):
        alts = sorted((top or {}).items(), key=lambda kv: -_value(kv[1]))
        top_lps = tuple(TopLogprob(UNKNOWN_ID, str(t).encode(), _value(v)) for t, v in alts)
        out.append(TokenLogprob(UNKNOWN_ID, str(token).encode(), _value(value), top_lps))
    return tuple(out)
