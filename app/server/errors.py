"""The server's one error type: a request it refuses, naming the field (4xx, never 500)."""

from __future__ import annotations

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
