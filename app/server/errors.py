"""The server's one error type: a request it refuses, naming the field (4xx, never 500)."""

from __future__ import annotations

from typing import Any

from ember.text import escape


class RequestInvalid(Exception):
    """A request body the server refuses; `param` names the field (400 by default: OpenAI's and
    llama-server's status for a bad request, and Ollama's).

    Both may echo the client's own text (an unknown field's name, a model name), so each is made
    one escaped line here: no newline, control character or lone surrogate reaches a reply or a
    log."""

    def __init__(self, param: str, reason: str, status: int = 400) -> None:
        self.param = escape(param)
        self.reason = escape(reason)
        self.status = status
        super().__init__(f"{self.param}: {self.reason}")


def model_name(value: Any, status: int = 422) -> str | None:
    """A request's `model` (None when absent): a non-empty string of at most 512 characters
    that is valid Unicode (a lone surrogate cannot be looked up, logged or stored)."""
    if value is None:
        return None
    if not isinstance(value, str) or not 0 < len(value) <= 512:
        raise RequestInvalid("model", "must be a non-empty string", status=status)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise RequestInvalid(
            "model", "must be valid Unicode (it holds a lone surrogate)", status
        ) from None
    return value
