"""The engine, chat, server and evaluation rows of the parameter table: how a model is loaded
(EngineOptions), what a new chat starts with, and the server's and `ember eval`'s own limits.

One KV-cache vocabulary everywhere a user or client sees one: f16 | q8 | q4
(models/quants/kv_cache.py); each runner maps it onto its own element type internally.
"""

from __future__ import annotations

import os

from ember.app.parameters.sampling import MAX_TOKENS
from ember.app.parameters.types import Parameter, Range
from ember.engine.api import AUTO_CTX
from ember.models.quants.kv_cache import DEFAULT_KV_CACHE, KV_CACHE_TYPES
from ember.models.text.chat_format import CHAT_FORMATS

RUNNERS = ("auto", "torch", "llama.cpp")
FLAG_RUNNERS = (*RUNNERS, "remote", "fake")  # remote: --remote URL; fake: tests and demos
DEVICES = ("auto", "cpu", "cuda", "mps")


def machine_threads() -> int:
    """The most threads any setting or flag may ask for: this machine's CPU count."""
    return os.cpu_count() or 1


def _threads() -> Range:
    return Range(0, machine_threads())


CHAT = (
    Parameter(
        "model",
        str,
        "gemma3-270m",
        "the default model for new chats",
        "chat",
        label="Default model",
    ),
)

ENGINE = (
    Parameter(
        "runner", str, "auto", "torch | llama.cpp | auto", "engine", choices=RUNNERS, label="Runner"
    ),
    Parameter(
        "device", str, "auto", "auto | cpu | cuda | mps", "engine", choices=DEVICES, label="Device"
    ),
    Parameter(
        "threads",
        int,
        0,
        "CPU threads (0 = auto: the cores free now)",
        "engine",
        _threads,
        reason=lambda: (
            f"must be between 0 (auto: the cores free now) and {machine_threads()} (this machine's CPUs)"
        ),
        label="Threads (0 = auto)",
    ),
    Parameter(
        "ctx",
        int,
        4096,
        "context limit in tokens, or auto: the largest that fits free RAM",
        "engine",
        Range(16, MAX_TOKENS),
        rule=lambda v: v == AUTO_CTX or 16 <= v <= MAX_TOKENS,
        reason=f"must be auto or between 16 and {MAX_TOKENS} tokens",
        label="Context (tokens, 0 = auto)",
        metavar="N|auto",
    ),
    Parameter(
        "kv_cache",
        str,
        DEFAULT_KV_CACHE,
        "KV cache type: f16 (16-bit), q8 (8-bit: about half the memory), q4 (4-bit, "
        "llama.cpp runner only)",
        "engine",
        choices=KV_CACHE_TYPES,
        label="KV cache (" + "/".join(KV_CACHE_TYPES) + ")",
        metavar="|".join(KV_CACHE_TYPES),
    ),
    Parameter(
        "sink",
        int,
        4,
        "attention-sink tokens kept at the start",
        "engine",
        Range(0, 1024),
        reason="must be between 0 and 1024 tokens",
        label="Sink tokens",
    ),
    Parameter(
        "window",
        int,
        -1,
        "recent tokens kept when the cache is full (0 = off, -1 = from ctx)",
        "engine",
        Range(-1, MAX_TOKENS),
        reason="must be -1 (from ctx), 0 (off) or a token count",
        label="Window (-1 auto, 0 off)",
    ),
    Parameter(
        "draft",
        str,
        "auto",
        "speculative decoding: a draft model, prompt lookup, a self-draft, none, or auto "
        "(lookup on torch, none on llama.cpp; the default)",
        "engine",
        rule=lambda v: bool(v.strip()),
        reason="must be auto, none, lookup, self or a model",
        label="Draft (auto/none/lookup/self/model)",
        metavar="MODEL|lookup|self|none|auto",
    ),
    Parameter(
        "draft_tokens",
        int,
        4,
        "most tokens drafted per step",
        "engine",
        Range(1, 32),
        label="Draft tokens",
        metavar="K",
    ),
    Parameter(
        "prefix_cache", bool, True, "reuse cached prompt prefixes", "engine", label="Prefix cache"
    ),
    Parameter(
        "system_prompt",
        str,
        "",
        "the system prompt new chats and `ember run` start with",
        "chat",
        label="System prompt",
    ),
    Parameter(
        "chat_format",
        str,
        "auto",
        "how chats are rendered: the model's template, the base-model scaffold, or auto "
        "(the scaffold for pretrained models; the default)",
        "engine",
        choices=CHAT_FORMATS,
        label="Chat format (auto/template/scaffold)",
    ),
    Parameter(
        "kv_budget",
        int,
        0,
        "KV cache memory, e.g. 512M (default: from --ctx)",
        "engine",
        rule=lambda v: v > 0,
        reason="must be a positive size (e.g. 512M)",
        setting=False,
    ),
)

SERVER = (
    Parameter("port", int, 8080, "port", "server", Range(1, 65535), setting=False),
    Parameter(
        "max_body_bytes",
        int,
        1 << 20,
        "request body limit",
        "server",
        rule=lambda v: v > 0,
        reason="must be a positive byte count",
        setting=False,
    ),
    Parameter(
        "max_loaded",
        int,
        1,
        "models kept loaded while idle",
        "server",
        Range(1, 64),
        reason="must be between 1 and 64 models",
        setting=False,
    ),
)

EVAL = (
    Parameter(
        "chunk",
        int,
        1,
        "streaming: tokens fed per forward (1 = exact)",
        "eval",
        Range(1, MAX_TOKENS),
        reason="must be >= 1 token",
        setting=False,
    ),
    Parameter(
        "stride",
        int,
        1,
        "recompute: tokens scored per recompute (1 = exact)",
        "eval",
        Range(1, MAX_TOKENS),
        reason="must be >= 1 token",
        setting=False,
    ),
    Parameter(
        "score_tokens",
        int,
        0,
        "score only the first N tokens (0 = all)",
        "eval",
        Range(0, 1 << 40),
        reason="must be >= 0 (0 = all)",
        setting=False,
    ),
)
