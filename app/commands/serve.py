"""`ember serve`: the OpenAI-compatible HTTP API."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ember.engine.api import Backend

NAME = "serve"
HELP = "Serve registered models over an OpenAI-compatible HTTP API (127.0.0.1 by default)."
ORDER = 40


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8080, help="port (default 8080)")
    parser.add_argument("--model", help="preload this model; the default for requests naming none")
    parser.add_argument(
        "--api-key", default=None, help="require this key (default: $EMBER_API_KEY)"
    )
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a Host name clients use to reach this server (repeatable)",
    )
    parser.add_argument("--max-body-bytes", type=int, default=1 << 20, help="request body limit")
    parser.add_argument("--max-loaded", type=int, default=1, help="models kept loaded while idle")
    parser.add_argument("--runner", default="auto", choices=["auto", "torch", "llama.cpp"])
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda", "mps"])
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--ctx", type=int, default=4096)


def _registered_names() -> list[str]:
    from ember.models.registry import registry

    return [m.name for m in registry.list_models()]


def run(args: argparse.Namespace) -> int:
    from ember.app.errors import ConfigError
    from ember.app.server.app import create_app
    from ember.app.server.pool import ModelPool
    from ember.app.server.security import Guard, require_key_for
    from ember.engine.api import EngineOptions, load_engine

    api_key = args.api_key if args.api_key is not None else os.environ.get("EMBER_API_KEY", "")
    refusal = require_key_for(args.host, api_key)
    if refusal:
        raise ConfigError(refusal)
    if not 0 < args.port < 65536:
        raise ConfigError(f"--port {args.port}: must be between 1 and 65535")

    def load(name: str) -> Backend:
        return load_engine(
            EngineOptions(
                model=name,
                runner=args.runner,
                device=args.device,
                threads=args.threads,
                ctx=args.ctx,
            )
        )

    pool = ModelPool(
        load,
        _registered_names,
        default_model=args.model,
        max_loaded=args.max_loaded,
        max_tokens_cap=args.ctx,
    )
    if args.model:
        pool.preload(args.model)
    guard = Guard(
        bind_host=args.host,
        api_key=api_key,
        allowed_hosts=frozenset(h.lower() for h in args.allowed_host),
        max_body_bytes=args.max_body_bytes,
    )
    import uvicorn

    print(f"ember: serving on http://{args.host}:{args.port}/v1", flush=True)
    uvicorn.run(create_app(pool, guard), host=args.host, port=args.port, log_level="warning")
    return 0
