"""The server's one error type: a request it refuses, naming the field (4xx, never 500)."""

from __future__ import annotations


class RequestInvalid(Exception):
    """A request body the server refuses; `param` names the field."""

    def __init__(self, param: str, reason: str, status: int = 422) -> None:
        super().__init__(f"{param}: {reason}")
        self.param = param
        self.reason = reason
        self.status = status
