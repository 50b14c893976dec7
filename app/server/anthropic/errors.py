"""Anthropic's error shape: {"type": "error", "error": {"type": ..., "message": ...}}."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ember.text import escape

if TYPE_CHECKING:
    from starlette.responses import Response

PREFIX = "/v1/messages"  # the routes whose errors (guard refusals included) take this shape

# Anthropic's error type of each HTTP status (https://docs.anthropic.com/en/api/errors)
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    503: "overloaded_error",
    529: "overloaded_error",
}


def error_body(status: int, message: str) -> dict[str, object]:
    kind = ERROR_TYPES.get(status, "invalid_request_error" if status < 500 else "api_error")
    return {"type": "error", "error": {"type": kind, "message": escape(message)}}


def error_response(status: int, message: str) -> Response:
    """The error as Anthropic answers it; a 422 (the other routes' "invalid") is a 400 here."""
    from starlette.responses import JSONResponse

    status = 400 if status == 422 else status
    return JSONResponse(error_body(status, message), status_code=status)


def is_anthropic_path(path: str) -> bool:
    return path == PREFIX or path.startswith(PREFIX + "/")
