"""The server's guards: API key, Host and Origin checks, request body size.

Safe by default: the server binds 127.0.0.1; any other address needs an API key. A Host header
that is not this server's name stops DNS-rebinding pages; an Origin header from another site
stops cross-site requests from a browser. The key is compared in constant time.
"""

from __future__ import annotations

import hmac
import ipaddress
from dataclasses import dataclass, field
from urllib.parse import urlsplit

LOCAL_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def is_loopback(host: str) -> bool:
    """Whether host is a loopback name or address."""
    if host in LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def is_wildcard(host: str) -> bool:
    """Whether host binds every interface (0.0.0.0 or ::)."""
    return host in ("0.0.0.0", "::", "")


def _split_host(value: str) -> str:
    """The host part of a Host header value ('[::1]:8080' -> '::1', 'a.b:80' -> 'a.b')."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


@dataclass(frozen=True)
class Guard:
    """Decides whether a request may proceed; returns (status, reason) to refuse."""

    bind_host: str
    api_key: str = ""
    allowed_hosts: frozenset[str] = field(default_factory=frozenset)
    max_body_bytes: int = 1 << 20

    def host_allowed(self, host_header: str | None) -> bool:
        if host_header is None:
            return False
        host = _split_host(host_header)
        if is_loopback(host) or host in self.allowed_hosts:
            return True
        if is_wildcard(self.bind_host):
            return not self.allowed_hosts  # any name, unless the operator listed the allowed ones
        return host == self.bind_host.lower()

    def origin_allowed(self, origin: str | None) -> bool:
        if origin is None:  # not a browser cross-site request
            return True
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return False
        return self.host_allowed(parts.netloc)

    def key_ok(self, authorization: str | None, x_api_key: str | None = None) -> bool:
        """Authorization: Bearer KEY, or Anthropic's x-api-key: KEY (either, when both come)."""
        if not self.api_key:
            return True
        given = [x_api_key] if x_api_key is not None else []
        if authorization and authorization.startswith("Bearer "):
            given.append(authorization[len("Bearer ") :])
        key = self.api_key.encode()
        return any(hmac.compare_digest(g.strip().encode(), key) for g in given)

    def check(self, headers: dict[str, str], path: str) -> tuple[int, str] | None:
        """None when the request passes; else (HTTP status, reason)."""
        if not self.host_allowed(headers.get("host")):
            return 403, "Host header not allowed (DNS rebinding protection)"
        if not self.origin_allowed(headers.get("origin")):
            return 403, "cross-origin requests are not allowed"
        key_ok = self.key_ok(headers.get("authorization"), headers.get("x-api-key"))
        if path != "/health" and not key_ok:
            return 401, "missing or wrong API key (send Authorization: Bearer KEY or x-api-key)"
        length = headers.get("content-length")
        if length is not None:
            if not length.isdigit():
                return 400, "Content-Length is not a number"
            if int(length) > self.max_body_bytes:
                return 413, f"request body exceeds {self.max_body_bytes} bytes"
        return None


def require_key_for(host: str, api_key: str) -> str | None:
    """A reason to refuse starting: binding a non-loopback address without an API key."""
    if not is_loopback(host) and not api_key:
        return (
            f"refusing to bind {host} without an API key: pass --api-key KEY or set "
            "EMBER_API_KEY (only 127.0.0.1 is served without one)"
        )
    return None
