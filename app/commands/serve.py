"""`ember serve`: the OpenAI-compatible HTTP API."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from ember.app.options import add_engine_flags

if TYPE_CHECKING:
    from ember.app.config import Settings
    from ember.app.server.model_aliases import ModelAliases
    from ember.engine.api import Backend, EngineOptions
    from ember.engine.embedding import Embedder

NAME = "serve"
HELP = (
    "Serve registered models over OpenAI-, Anthropic- and Ollama-compatible HTTP APIs "
    "(127.0.0.1 by default; --port 11434 stands in for Ollama)."
)
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
    parser.add_argument(
        "--allow-model-path",
        action="append",
        default=[],
        metavar="DIR",
        help="requests may name model files under DIR by path (repeatable; default: none)",
    )
    parser.add_argument(
        "--allow-remote",
        action="append",
        default=[],
        metavar="URL",
        help="requests may name an OpenAI-compatible server whose URL starts with URL; it gets "
        "no API key of this server (repeatable; default: none)",
    )
    parser.add_argument(
        "--alias",
        action="append",
        default=[],
        metavar="PATTERN=MODEL",
        help="answer requests for model names matching PATTERN (a glob) with MODEL, e.g. "
        "'claude-*=gemma3-270m' for Claude Code (repeatable; first match wins)",
    )
    parser.add_argument("--max-body-bytes", type=int, default=1 << 20, help="request body limit")
    parser.add_argument("--max-loaded", type=int, default=1, help="models kept loaded while idle")
    parser.add_argument(
        "--metrics", action="store_true", help="serve GET /metrics (Prometheus text format)"
    )
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


def _is_remote(name: str) -> bool:
    return name.startswith(("http://", "https://"))


def served_check(args: argparse.Namespace) -> Callable[[str], bool]:
    """name -> whether a request may name it: a registered model or alias, the --model the
    operator gave, a file under an --allow-model-path folder, a URL under an --allow-remote."""
    from pathlib import Path

    from ember.app.loading import open_registry
    from ember.models.registry.starter import STARTER_NAME, starter_installed

    folders = [Path(d).expanduser().resolve() for d in args.allow_model_path]
    prefixes = [u.rstrip("/") for u in args.allow_remote]

    def is_served(name: str) -> bool:
        if name == args.model:
            return True
        if _is_remote(name):
            return any(name == p or name.startswith(p + "/") for p in prefixes)
        if "/" in name or "\\" in name or name.startswith("."):
            if not folders:
                return False
            path = Path(name).expanduser().resolve()
            return any(path.is_relative_to(folder) for folder in folders)
        if name == STARTER_NAME and starter_installed():
            return True
        return open_registry().find(name) is not None

    return is_served


def describe_model(name: str) -> dict[str, object]:
    """What the registry knows of a model, for Ollama's /api/tags and /api/ps."""
    from datetime import UTC, datetime

    from ember.app.loading import open_registry

    record = open_registry().find(name)
    if record is None:
        return {}
    added = datetime.fromtimestamp(record.added_at or 0, UTC).isoformat()
    params = f"{record.parameters / 1e6:.0f}M" if record.parameters else ""
    return {
        "modified_at": added.replace("+00:00", "Z"),
        "size": record.size_bytes,
        "digest": record.sha256 or "",
        "format": record.format,
        "family": record.architecture or "",
        "parameter_size": params,
        "quantization_level": record.quant or "",
    }


def _aliases(args: argparse.Namespace) -> ModelAliases:
    """--alias PATTERN=MODEL, each MODEL one this server serves (else it stops here)."""
    from ember.app.errors import ConfigError
    from ember.app.server.model_aliases import ModelAliases

    aliases = ModelAliases.parse(args.alias)
    is_served = served_check(args)
    for alias in aliases.aliases:
        if not is_served(alias.model):
            raise ConfigError(f"--alias {alias.pattern}={alias.model}: no model {alias.model!r}")
        print(f"ember: model names matching {alias.pattern!r} -> {alias.model}", flush=True)
    return aliases


def run(args: argparse.Namespace) -> int:
    from ember.app.config import load_settings
    from ember.app.errors import ConfigError
    from ember.app.loading import load_backend
    from ember.app.rules import MAX_TOKENS, check_flag
    from ember.app.server.app import create_app
    from ember.app.server.embedder_pool import EmbedderPool
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
        if _is_remote(name):  # an --allow-remote server: never with this server's credentials
            from ember.engine.remote.backend import RemoteBackend, RemoteConfig

            return RemoteBackend(RemoteConfig(name, "", api_key=""))
        backend = load_backend(options_for(name))
        if backend.info.context_note:  # --ctx auto: the context it chose, and why
            print(f"ember: {name}: {backend.info.context_note}", file=sys.stderr, flush=True)
        return backend

    def load_embedder(name: str) -> Embedder:
        from ember.app.loading import load_embedding_model

        return load_embedding_model(options_for(name))

    aliases = _aliases(args)

    from ember.app.server.llamaserver.metrics import ServerMetrics

    metrics = ServerMetrics() if args.metrics else None  # counts every API's requests
    pool = ModelPool(
        metrics.metered(load) if metrics else load,
        registered_names,
        default_model=args.model,
        max_loaded=args.max_loaded,
        max_tokens_cap=defaults.ctx or MAX_TOKENS,  # ctx auto: each model's own limit
        is_served=served_check(args),
        describe=describe_model,
        aliases=aliases,
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

    print(
        f"ember: serving on http://{args.host}:{args.port} (OpenAI: /v1, Anthropic: /v1/messages, "
        "Ollama: /api)",
        flush=True,
    )
    embedders = EmbedderPool(load_embedder, pool, max_loaded=args.max_loaded)
    uvicorn.run(
        create_app(pool, guard, embedders, metrics),
        host=args.host,
        port=args.port,
        log_level="warning",
    )
    return 0
