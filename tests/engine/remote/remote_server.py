"""A local OpenAI-compatible test server on 127.0.0.1 that misbehaves on request.

The `model` field picks the behaviour:
  ok         streams "Hello, world!" in four chunks, usage, then [DONE]
  long       like ok, finish_reason "length"
  nodone     like ok but closes without the [DONE] line (some servers do)
  stall      streams "Hello" then says nothing until the test releases it
  drop       streams "Hello, " then drops the connection
  malformed  streams "Hello" then a chunk that is not JSON
  midstream  streams "Hello" then an error object
  e500       answers 500
  think      streams "<think>The capital is Paris.</think>Paris." (reasoning in the content, as
             a server without a reasoning parser sends it)
any other model answers 404. With `api_key` set, a wrong or missing bearer token gets 401.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODELS = ("ok", "long", "nodone", "stall", "drop", "malformed", "midstream", "e500", "think")
PIECES = ("Hello", ", ", "world", "!")
THINK_PIECES = ("<thi", "nk>The capital", " is Paris.</th", "ink>", "Paris", ".")


class RemoteTestServer(ThreadingHTTPServer):
    """The server plus what tests inspect: received bodies and the stall release."""

    daemon_threads = True

    def __init__(self, api_key: str = "") -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.api_key = api_key
        self.requests: list[dict[str, Any]] = []
        self.release = threading.Event()  # ends a "stall" response
        self.stalled = threading.Event()  # set once a stalled response has sent its first chunk

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"


class _Handler(BaseHTTPRequestHandler):
    server: RemoteTestServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def _json(self, status: int, obj: Any) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _authorized(self) -> bool:
        key = self.server.api_key
        if key and self.headers.get("Authorization") != f"Bearer {key}":
            self._json(401, {"error": {"message": "invalid api key"}})
            return False
        return True

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        if not self._authorized():
            return
        if self.path == "/v1/models":
            self._json(
                200, {"object": "list", "data": [{"id": m, "object": "model"} for m in MODELS]}
            )
        else:
            self._json(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        length = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(length) or b"{}")
        self.server.requests.append({"path": self.path, **body})
        if not self._authorized():
            return
        if self.path == "/tokenize":
            self._json(200, {"tokens": list(range(len(str(body.get("prompt", "")).split())))})
            return
        if self.path not in ("/v1/chat/completions", "/v1/completions"):
            self._json(404, {"error": {"message": f"no route {self.path}"}})
            return
        model = body.get("model")
        if model == "e500":
            self._json(500, {"error": {"message": "internal failure"}})
        elif model not in MODELS:
            self._json(404, {"error": {"message": f"model {model!r} not found"}})
        else:
            self._stream(str(model), chat=self.path.endswith("chat/completions"))

    def _chunk(self, obj: Any) -> None:
        line = obj if isinstance(obj, str) else json.dumps(obj)
        self.wfile.write(f"data: {line}\n\n".encode())
        self.wfile.flush()

    def _piece(self, text: str, chat: bool, finish: str | None = None) -> dict[str, Any]:
        choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
        if chat:
            choice["delta"] = {"content": text} if text else {}
        else:
            choice["text"] = text
        return {"id": "x", "object": "chunk", "choices": [choice]}

    def _stream(self, model: str, chat: bool) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(b": keep-alive comment\n\n")
        if model in ("stall", "malformed", "midstream"):
            self._chunk(self._piece("Hello", chat))
            if model == "stall":
                self.server.stalled.set()
                self.server.release.wait(timeout=60)
            elif model == "malformed":
                self._chunk("{not json")
            else:
                self._chunk({"error": {"message": "out of memory"}})
            return
        if model == "drop":
            self._chunk(self._piece("Hello", chat))
            self._chunk(self._piece(", ", chat))
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        for piece in THINK_PIECES if model == "think" else PIECES:
            self._chunk(self._piece(piece, chat))
        self._chunk(self._piece("", chat, "length" if model == "long" else "stop"))
        usage = {"prompt_tokens": 7, "completion_tokens": 4, "total_tokens": 11}
        self._chunk({"id": "x", "object": "chunk", "choices": [], "usage": usage})
        if model != "nodone":
            self._chunk("[DONE]")


@contextmanager
def serve(api_key: str = "") -> Iterator[RemoteTestServer]:
    """Run a RemoteTestServer in a thread for the duration of the block."""
    server = RemoteTestServer(api_key)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.release.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
