"""The server tests' harness: the real ASGI app under uvicorn in a thread (`running_server`), the\nreal `ember serve` process (`ember_serve`, `serve_models`); both on 127.0.0.1, on a free port."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ember.app.server.app import create_app
from ember.app.server.embedder_pool import EmbedderPool
from ember.app.server.llamaserver.metrics import ServerMetrics
from ember.app.server.pool import ModelPool
from ember.app.server.security import Guard
from tests.waiting import wait_until

# The function the real-model SDK tests offer (each API wraps it in its own tool shape).
WEATHER_FUNCTION = {
    "name": "get_weather",
    "description": "Current weather for a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 30}},
        "required": ["city"],
    },
}


# The runner for tests that compare two greedy replies token for token (stream vs whole, the same
# request twice): torch's paged attention reads a sequence's cached blocks in position order, so
# two requests over the same cached prefix compute the same logits. llama.cpp's attention sums over
# the unified cache's cells in cell order, and where a reply's cells land depends on what earlier
# requests left there: on the starter model, one Responses request repeated three times after a
# warm-up answered "Yes, once upon a time." once and "Yes, it was..." twice (a 0.16-logit tie).
SAME_LOGITS_RUNNER = ("--runner", "torch")


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
    wait_until(lambda: server.started, "the test server starts", 30, gone=lambda: not thread.is_alive())
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@contextmanager
def ember_serve(home: Path, env: dict[str, str], *args: str) -> Iterator[str]:
    """The real `ember serve` process on a free port (args after the port); yields its URL once
    /health answers and, on exit, stops it and checks its log holds no traceback."""

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
        try:
            try:
                wait_until(lambda: _healthy(url), "ember serve answers /health", 300,
                           interval_s=0.2, gone=lambda: process.poll() is not None)  # fmt: skip
            except AssertionError as exc:
                raise AssertionError(f"{exc}; its log: {log_path.read_text()}") from None
            yield url
        finally:
            process.terminate()
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
    assert "Traceback" not in log_path.read_text()


def _healthy(url: str) -> bool:
    import httpx

    try:
        return httpx.get(f"{url}/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@contextmanager
def serve_models(
    home: Path,
    models: dict[str, Path],
    *args: str,
    drop_env: tuple[str, ...] = (),
    extra_env: dict[str, str] | None = None,
) -> Iterator[str]:
    """`ember serve *args` over a fresh EMBER_HOME (offline) where `ember add` registered each
    model file under its name: the real server the SDK tests talk to."""
    env = {**os.environ, "EMBER_HOME": str(home), "HF_HUB_OFFLINE": "1", **(extra_env or {})}
    for name in drop_env:
        env.pop(name, None)
    for name, path in models.items():
        subprocess.run([sys.executable, "-m", "ember", "add", str(path), "--name", name],
                       env=env, check=True, capture_output=True, timeout=300)  # fmt: skip
    with ember_serve(home, env, *args) as url:
        yield url


@contextmanager
def fake_engine_server(ctx: int, max_tokens_cap: int) -> Iterator[str]:
    """A real server on 127.0.0.1 over the real engine with the fake runner (context `ctx`)."""
    from ember.engine.api import EngineOptions
    from ember.engine.load import load_engine

    def load(name: str):
        return load_engine(EngineOptions(model="fake", runner="fake", ctx=ctx, prefix_disk_bytes=0))

    pool = ModelPool(load, lambda: ["fake"], default_model="fake", max_tokens_cap=max_tokens_cap)
    with running_server(pool, Guard(bind_host="127.0.0.1")) as url:
        yield url
