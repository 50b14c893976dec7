"""Runs the real ASGI app under uvicorn on 127.0.0.1 in a thread, on a free port."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ember.app.server.app import create_app
from ember.app.server.embedder_pool import EmbedderPool
from ember.app.server.llamaserver.metrics import ServerMetrics
from ember.app.server.pool import ModelPool
from ember.app.server.security import Guard


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def running_server(
    pool: ModelPool,
    guard: Guard,
    embedders: EmbedderPool | None = None,
    metrics: ServerMetrics | None = None,
) -> Iterator[str]:
    """Yields the base URL of a live server; stops it afterwards."""
    import uvicorn

    port = free_port()
    app = create_app(pool, guard, embedders, metrics)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("test server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@contextmanager
def ember_serve(home: Path, env: dict[str, str], *args: str) -> Iterator[str]:
    """The real `ember serve` process on a free port (args after the port); yields its URL once
    /health answers and, on exit, stops it and checks its log holds no traceback."""
    import httpx

    port = free_port()
    log_path = home / "serve.log"
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "ember", "serve", "--port", str(port), *args],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 300
        try:
            while True:
                try:
                    if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"ember serve did not start: {log_path.read_text()}")
                time.sleep(0.2)
            yield url
        finally:
            process.terminate()
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
    assert "Traceback" not in log_path.read_text()
