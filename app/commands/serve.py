"""`ember serve`: the OpenAI-compatible HTTP API."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from ember.app.options import add_engine_flags

if TYPE_CHECKING:
    from ember.app.config import Settings
    from ember.engine.api import Backend, EngineOptions

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
    add_engine_flags(parser, remote=False)


def registered_names() -> list[str]:
    """Every model a request may name: the registry's names (aliases resolve too)."""
    from ember.app.loading import open_registry

    return [m.name for m in open_registry().list_models()]


def model_options(args: argparse.Namespace, settings: Settings) -> Callable[[str], EngineOptions]:
    """How the server loads a model a request names: the settings file and environment under
    the command line's engine flags (app/options.py), as `ember run` and the TUI do."""
    from ember.app.options import EngineFlags, engine_options

    flags = EngineFlags.from_args(args)
    return lambda name: engine_options(name, settings, flags)


def run(args: argparse.Namespace) -> int:
    from ember.app.config import load_settings
    from ember.app.errors import ConfigError
    from ember.app.loading import load_backend
    from ember.app.rules import check_flag
    from ember.app.server.app import create_app
    from ember.app.server.pool import ModelPool
    from ember.app.server.security import Guard, require_key_for

    api_key = args.api_key if args.api_key is not None else os.environ.get("EMBER_API_KEY", "")
    refusal = require_key_for(args.host, api_key)
    if refusal:
        raise ConfigError(refusal)
    check_flag("--port", args.port)
    check_flag("--max-body-bytes", args.max_body_bytes)
    check_flag("--max-loaded", args.max_loaded)
    settings = load_settings()
    options_for = model_options(args, settings)
    defaults = options_for(args.model or settings.model)  # bad flags stop the server here

    def load(name: str) -> Backend:
        return load_backend(options_for(name))

    pool = ModelPool(
        load,
        registered_names,
        default_model=args.model,
        max_loaded=args.max_loaded,
        max_tokens_cap=defaults.ctx,
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
