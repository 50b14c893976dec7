"""Talking to a running `ember serve` from the command line (ember ps, ember stop)."""

from __future__ import annotations

import argparse
import os
from typing import Any


def add_server_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--server",
        default=os.environ.get("EMBER_SERVER", "http://127.0.0.1:8080"),
        help="the server's URL (default: $EMBER_SERVER or http://127.0.0.1:8080)",
    )
    parser.add_argument(
        "--api-key", default=None, help="the server's key (default: $EMBER_API_KEY)"
    )


def call(args: argparse.Namespace, method: str, path: str, body: Any = None) -> Any:
    """JSON from the server, or ConfigError with one line saying why not."""
    import httpx

    from ember.app.errors import ConfigError

    key = args.api_key if args.api_key is not None else os.environ.get("EMBER_API_KEY", "")
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    base = args.server.rstrip("/")
    try:
        reply = httpx.request(method, base + path, json=body, headers=headers, timeout=30)
    except httpx.HTTPError as exc:
        raise ConfigError(f"{base}: no Ember server answers ({type(exc).__name__})") from None
    try:
        data = reply.json()
    except ValueError:
        raise ConfigError(f"{base}{path}: answered {reply.status_code}, not JSON") from None
    if reply.status_code >= 400:
        error = data.get("error") if isinstance(data, dict) else None
        message = error.get("message") if isinstance(error, dict) else error
        raise ConfigError(f"{base}: {message or reply.status_code}")
    return data
