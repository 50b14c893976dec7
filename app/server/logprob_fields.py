"""The logprobs request fields (400 naming the field).

OpenAI chat and Ollama's /api/chat and /api/generate: `logprobs` (boolean) and `top_logprobs`
(0 to 20, only with logprobs: true); OpenAI completions: `logprobs` (an integer 0 to 5: that
many alternatives per token, the sampled token's always included; null = off).
Each parser returns (logprobs on?, alternatives per token).
"""

from __future__ import annotations

from typing import Any

from ember.app.server.errors import RequestInvalid
from ember.engine.api import MAX_TOP_LOGPROBS

MAX_COMPLETION_LOGPROBS = 5  # OpenAI's legacy completions limit


def _count(value: Any, param: str, hi: int, status: int = 400) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        kind = type(value).__name__
        raise RequestInvalid(param, f"must be an integer, got {kind}", status=status)
    if not 0 <= value <= hi:
        raise RequestInvalid(param, f"must be between 0 and {hi}, got {value}", status=status)
    return value


def parse(body: dict[str, Any], chat: bool, status: int = 400) -> tuple[bool, int]:
    """(logprobs, top_logprobs) of a chat body (OpenAI's or Ollama's: status 400) or an
    OpenAI completion body (chat False)."""
    value = body.get("logprobs")
    top = body.get("top_logprobs")
    if not chat:
        if top is not None:
            raise RequestInvalid(
                "top_logprobs", "is a chat field: /v1/completions takes logprobs: N (0 to 5)"
            )
        if value is None:
            return False, 0
        return True, _count(value, "logprobs", MAX_COMPLETION_LOGPROBS)
    if value is not None and not isinstance(value, bool):
        raise RequestInvalid("logprobs", "must be a boolean", status=status)
    if top is None:
        return bool(value), 0
    count = _count(top, "top_logprobs", MAX_TOP_LOGPROBS, status)
    if count and not value:
        raise RequestInvalid("top_logprobs", "needs logprobs: true", status=status)
    return bool(value), count
