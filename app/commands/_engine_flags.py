"""Engine flags shared by `ember run` and `ember eval` (--runner, --device, --ctx, --sink...)."""

from __future__ import annotations

import argparse
import re
from typing import Any

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_bytes(text: str) -> int:
    """'512M', '2G', '1.5GiB' or a plain byte count -> bytes."""
    match = _SIZE.match(text)
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size (try 512M or 2G)")
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


def add_engine_flags(parser: argparse.ArgumentParser) -> None:
    """Flags that choose how the model is loaded; defaults come from the settings file."""
    parser.add_argument("--runner", help="torch | llama.cpp | remote | auto (default: settings)")
    parser.add_argument(
        "--remote",
        metavar="URL",
        help="an OpenAI-compatible server to run MODEL on (key: $EMBER_REMOTE_API_KEY)",
    )
    parser.add_argument("--device", choices=("auto", "cpu", "cuda", "mps"))
    parser.add_argument("--threads", type=int, help="CPU threads (0 = physical cores)")
    parser.add_argument("--ctx", type=int, help="context limit in tokens")
    parser.add_argument(
        "--sink", type=int, help="attention-sink tokens kept at the start (default 4)"
    )
    parser.add_argument(
        "--window",
        type=int,
        help="recent tokens kept when the cache is full (0 = off, -1 = from --ctx)",
    )
    parser.add_argument(
        "--kv-budget", type=parse_bytes, help="KV cache memory, e.g. 512M (default: from --ctx)"
    )
    parser.add_argument(
        "--no-prefix-cache", action="store_true", help="do not reuse cached prompt prefixes"
    )
    parser.add_argument(
        "--draft",
        metavar="MODEL|lookup|self|none",
        help="speculative decoding: a draft model, prompt lookup, a self-draft, or none",
    )
    parser.add_argument(
        "--draft-tokens", type=int, metavar="K", help="most tokens drafted per step (default 4)"
    )
    parser.add_argument(
        "--chat-format",
        choices=("auto", "template", "scaffold"),
        help="how chats are rendered: the model's template, the base-model scaffold, or auto "
        "(scaffold for pretrained models)",
    )


def engine_options(args: argparse.Namespace, **overrides: Any) -> Any:
    """EngineOptions from the flags, falling back to the settings file and its env overrides."""
    from ember.app.config import load_settings
    from ember.engine.api import EngineOptions

    settings = load_settings()

    def pick(name: str, default: Any) -> Any:
        value = getattr(args, name, None)
        return default if value is None else value

    runner = pick("runner", settings.runner)
    remote_url = getattr(args, "remote", None) or ""
    if remote_url:
        runner = "remote"
    if runner not in ("auto", "torch", "llama.cpp", "remote", "fake"):
        from ember.engine.errors import EngineError

        raise EngineError(f"--runner {runner!r}: choose torch, llama.cpp, remote or auto")
    options: dict[str, Any] = {
        "model": args.model,
        "runner": runner,
        "device": pick("device", settings.device),
        "threads": pick("threads", settings.threads),
        "ctx": pick("ctx", settings.ctx),
        "sink": pick("sink", settings.sink),
        "window": pick("window", settings.window),
        "kv_budget_bytes": pick("kv_budget", 0),
        "prefix_cache": settings.prefix_cache and not getattr(args, "no_prefix_cache", False),
        "draft": pick("draft", settings.draft),
        "draft_tokens": pick("draft_tokens", settings.draft_tokens),
        "remote_url": remote_url,
        "chat_format": pick("chat_format", settings.chat_format),
    }
    options.update(overrides)
    return EngineOptions(**options)
