"""CORS: a browser's preflight (OPTIONS with Access-Control-Request-Method) is answered here,
before the API-key check, because preflights carry no key; the request that follows still needs
it. Only origins the guard allows (this server's own names, --allowed-host) get the
Access-Control-Allow-* headers; any other origin is refused as the guard refuses it.
"""

from __future__ import annotations

from typing import Any

from ember.app.server.security import Guard

METHODS = "GET, POST, DELETE, OPTIONS"
MAX_AGE_S = "600"


def _headers(scope: dict[str, Any]) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}


class CorsMiddleware:
    """Preflights answered; the allowed origin echoed on every response to it."""

    def __init__(self, app: Any, guard: Guard) -> None:
        self.app, self.guard = app, guard

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        origin = headers.get("origin")
        allowed = (
            origin is not None
            and self.guard.host_allowed(headers.get("host"))
            and self.guard.origin_allowed(origin)
        )
        preflight = scope["method"] == "OPTIONS" and "access-control-request-method" in headers
        if preflight:
            await self._preflight(send, origin if allowed else None, headers)
            return
        if not allowed:
            await self.app(scope, receive, send)
            return

        async def send_with_origin(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                extra = [(b"access-control-allow-origin", str(origin).encode("latin-1")),
                         (b"vary", b"Origin")]  # fmt: skip
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, send_with_origin)

    async def _preflight(self, send: Any, origin: str | None, headers: dict[str, str]) -> None:
        if origin is None:
            body = b'{"error": {"message": "cross-origin requests are not allowed", "code": 403}}'
            start = {"type": "http.response.start", "status": 403,
                     "headers": [(b"content-type", b"application/json")]}  # fmt: skip
            await send(start)
            await send({"type": "http.response.body", "body": body})
            return
        asked = headers.get("access-control-request-headers", "authorization, content-type")
        allow = [
            (b"access-control-allow-origin", origin.encode("latin-1")),
            (b"access-control-allow-methods", METHODS.encode()),
            (b"access-control-allow-headers", asked[:1024].encode("latin-1")),
            (b"access-control-max-age", MAX_AGE_S.encode()),
            (b"vary", b"Origin"),
            (b"content-length", b"0"),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": allow})
        await send({"type": "http.response.body", "body": b""})
