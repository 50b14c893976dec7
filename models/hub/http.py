"""One streamed HTTP GET for file transfer, on the standard library (http.client).

Ember does the transfer itself so resume (Range) and verification are ours. Redirects are
followed by hand so the Hub token never travels to another host (the CDN gets a signed URL
instead), only to http(s) URLs, and a loop is refused at its first repeat; HTTP(S)_PROXY /
NO_PROXY from the environment are honoured.
"""

from __future__ import annotations

import http.client
import ssl
import urllib.request
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

MAX_REDIRECTS = 10


class RedirectError(Exception):
    """A redirect that will not work on a retry either: a loop, too many, or not http(s)."""


@dataclass
class Stream:
    """An open response: status, headers (lower-case names) and the body to read from."""

    status: int
    headers: dict[str, str]
    response: http.client.HTTPResponse
    connection: http.client.HTTPConnection
    url: str

    def read_some(self, max_bytes: int) -> bytes:
        """Whatever body bytes have arrived (at most max_bytes, one socket read); b"" at the end."""
        return self.response.read1(max_bytes)

    def close(self) -> None:
        self.connection.close()


def _connection(url: str, timeout_s: float) -> tuple[http.client.HTTPConnection, str]:
    """A connection for url (through a proxy when configured) and the request target."""
    parts = urlsplit(url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:  # a port that is not a number or out of range
        raise RedirectError(f"invalid URL {url[:200]!r}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise RedirectError(f"refusing a non-HTTP URL {url[:200]!r}")
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    proxy = urllib.request.getproxies().get(parts.scheme)
    if proxy and urllib.request.proxy_bypass(parts.hostname):
        proxy = None
    conn: http.client.HTTPConnection
    if proxy:
        proxy_parts = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
        proxy_host, proxy_port = proxy_parts.hostname or "", proxy_parts.port or 8080
        if parts.scheme == "https":
            conn = http.client.HTTPSConnection(
                proxy_host, proxy_port, timeout=timeout_s, context=ssl.create_default_context()
            )
            conn.set_tunnel(parts.hostname, port)
        else:
            conn = http.client.HTTPConnection(proxy_host, proxy_port, timeout=timeout_s)
            target = url
    elif parts.scheme == "https":
        conn = http.client.HTTPSConnection(
            parts.hostname, port, timeout=timeout_s, context=ssl.create_default_context()
        )
    else:
        conn = http.client.HTTPConnection(parts.hostname, port, timeout=timeout_s)
    return conn, target


def open_stream(url: str, headers: dict[str, str], timeout_s: float) -> Stream:
    """GET url following redirects; Authorization is dropped once the host changes.

    RedirectError for a redirect to a non-http(s) URL, a loop, or more than MAX_REDIRECTS."""
    headers = dict(headers)
    origin = urlsplit(url).netloc
    seen = {url}
    for _ in range(MAX_REDIRECTS + 1):
        conn, target = _connection(url, timeout_s)
        if urlsplit(url).netloc != origin:
            headers.pop("Authorization", None)
        conn.request("GET", target, headers=headers)
        response = conn.getresponse()
        if response.status in (301, 302, 303, 307, 308) and response.getheader("Location"):
            location = urljoin(url, response.getheader("Location", ""))
            response.read()
            conn.close()
            if location in seen:
                raise RedirectError(f"redirect loop at {location[:200]}")
            seen.add(location)
            url = location
            continue
        lowered = {k.lower(): v for k, v in response.getheaders()}
        return Stream(response.status, lowered, response, conn, url)
    raise RedirectError(f"more than {MAX_REDIRECTS} redirects, the last to {url[:200]}")
