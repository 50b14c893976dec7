"""What /v1/messages (Anthropic) or /v1/responses adds over the same request on /v1/chat/completions.

Starts a real `ember serve` on 127.0.0.1, then sends the same conversation (greedy, the same
max tokens) to both routes, taking turns round by round, whole and streamed; reports the median
of the per-round time ratios (route / chat), so a busy machine's swings hit both alike. Both
replies are checked to be the same text. The starter model's base-model chat ends its replies
after about 10 tokens, so the model's time dominates; `--scripted N` instead serves the real app
in this process over a backend that emits N tokens at once (tests/app/scripted_backend.py), so
the ratio is the routes' own cost per token (translation, SSE framing), with no model. Usage:
    python benchmarks/bench_api_overhead.py [--route messages|responses] [--model gemma3-270m]
        [--max-tokens 32] [--rounds 15] [--scripted 256]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.bench_server import ROOT, _free_port, _wait_healthy  # noqa: E402

PROMPT = "Write two sentences about the sea."
Timed = Callable[[httpx.Client, str, int, bool], tuple[float, str]]


def _isa() -> str:
    try:
        flags = next(
            line
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("flags")
        ).split()
    except (OSError, StopIteration):
        return platform.machine()
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    return f"{platform.machine()} {isa}, {os.cpu_count()} CPUs"


def _timed(
    client: httpx.Client,
    path: str,
    body: dict[str, Any],
    whole_text: Callable[[Any], str],
    delta_text: Callable[[str], str | None],
) -> tuple[float, str]:
    """Sends `body` to `path` and times it; `delta_text` reads one SSE line (None: no text)."""
    start = time.perf_counter()
    if not body["stream"]:
        reply = client.post(path, json=body).json()
        return time.perf_counter() - start, whole_text(reply)
    parts = []
    with client.stream("POST", path, json=body) as response:
        for line in response.iter_lines():
            if (part := delta_text(line)) is not None:
                parts.append(part)
    return time.perf_counter() - start, "".join(parts)


def _chat_delta(line: str) -> str | None:
    if not line.startswith("data: {"):
        return None
    return "".join(c["delta"].get("content") or "" for c in json.loads(line[6:])["choices"])


def _chat(client: httpx.Client, model: str, max_tokens: int, stream: bool) -> tuple[float, str]:
    body = {"model": model, "max_tokens": max_tokens, "temperature": 0, "stream": stream,
            "messages": [{"role": "user", "content": PROMPT}]}  # fmt: skip
    return _timed(client, "/v1/chat/completions", body,
                  lambda r: r["choices"][0]["message"]["content"], _chat_delta)  # fmt: skip


def _messages(client: httpx.Client, model: str, max_tokens: int, stream: bool) -> tuple[float, str]:
    body = {"model": model, "max_tokens": max_tokens, "temperature": 0, "stream": stream,
            "messages": [{"role": "user", "content": PROMPT}]}  # fmt: skip
    return _timed(
        client, "/v1/messages", body, lambda r: "".join(b["text"] for b in r["content"]),
        lambda line: json.loads(line[6:])["delta"]["text"]
        if line.startswith("data: ") and '"text_delta"' in line else None,
    )  # fmt: skip


def _responses(
    client: httpx.Client, model: str, max_tokens: int, stream: bool
) -> tuple[float, str]:
    body = {"model": model, "max_output_tokens": max_tokens, "temperature": 0, "stream": stream,
            "input": PROMPT, "store": False}  # fmt: skip
    return _timed(
        client, "/v1/responses", body,
        lambda r: "".join(
            p["text"] for i in r["output"] if i["type"] == "message" for p in i["content"]
        ),
        lambda line: json.loads(line[6:])["delta"]
        if line.startswith("data: ") and '"response.output_text.delta"' in line else None,
    )  # fmt: skip


ROUTES: dict[str, Timed] = {"messages": _messages, "responses": _responses}


def _paired(client: httpx.Client, route: Timed, args: argparse.Namespace, stream: bool) -> str:
    """Alternates chat and `route` for --rounds rounds; one line of medians."""
    _chat(client, args.model, args.max_tokens, stream)  # warm both paths
    route(client, args.model, args.max_tokens, stream)
    ratios, chat_s, route_s = [], [], []
    for i in range(args.rounds):
        pair = [_chat, route] if i % 2 == 0 else [route, _chat]
        times = {f: f(client, args.model, args.max_tokens, stream) for f in pair}
        (c, ctext), (r, rtext) = times[_chat], times[route]
        assert ctext == rtext, (ctext, rtext)
        ratios.append(r / c)
        chat_s.append(c)
        route_s.append(r)
    return (
        f"{'streamed' if stream else 'whole'}: chat {statistics.median(chat_s) * 1e3:.1f} ms, "
        f"{args.route} {statistics.median(route_s) * 1e3:.1f} ms, median ratio "
        f"{statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f}; "
        f"{args.rounds} rounds, {args.max_tokens} tokens, {_isa()})"
    )


def _scripted(args: argparse.Namespace) -> None:
    """--scripted: the same pairs over the real app and a backend with no model."""
    from ember.app.server.pool import ModelPool
    from ember.app.server.security import Guard
    from tests.app.scripted_backend import ScriptedBackend
    from tests.app.server.server_harness import running_server

    words = [f" w{i}" for i in range(args.scripted)]
    args.max_tokens = args.scripted
    pool = ModelPool(lambda name: ScriptedBackend(name, words), lambda: [args.model],
                     default_model=args.model, max_tokens_cap=args.scripted)  # fmt: skip
    with running_server(pool, Guard(bind_host="127.0.0.1")) as url:
        with httpx.Client(base_url=url, timeout=600) as client:
            for stream in (False, True):
                print(_paired(client, ROUTES[args.route], args, stream), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--route", choices=sorted(ROUTES), default="messages")
    parser.add_argument("--model", default="gemma3-270m")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--scripted", type=int, default=0, metavar="TOKENS",
                        help="no model: the routes' own cost over TOKENS instant tokens")  # fmt: skip
    args = parser.parse_args()
    if args.scripted:
        _scripted(args)
        return
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    argv = [sys.executable, "-m", "ember", "serve", "--port", str(port), "--model", args.model]
    argv += ["--threads", str(args.threads)] if args.threads else []
    proc = subprocess.Popen(argv, cwd=ROOT)
    try:
        _wait_healthy(url, proc)
        with httpx.Client(base_url=url, timeout=600) as client:
            for stream in (False, True):
                print(_paired(client, ROUTES[args.route], args, stream), flush=True)
    finally:
        proc.terminate()
        proc.wait(timeout=60)


if __name__ == "__main__":
    main()
