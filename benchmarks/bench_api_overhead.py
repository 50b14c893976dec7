"""What /v1/messages (Anthropic) adds over the same request on /v1/chat/completions.

Starts a real `ember serve` on 127.0.0.1, then sends the same conversation (greedy, the same
max_tokens) to both routes, taking turns round by round, whole and streamed; reports the median
of the per-round time ratios (messages / chat), so a busy machine's swings hit both alike. Both
replies are checked to be the same text. Usage:
    python benchmarks/bench_api_overhead.py [--model gemma3-270m] [--max-tokens 32] [--rounds 15]
"""

from __future__ import annotations

import argparse
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent  # `python -m ember` works from a checkout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_healthy(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=2).json().get("loaded"):
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit("ember serve did not become healthy")


PROMPT = "Write two sentences about the sea."


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


def _chat(client: httpx.Client, model: str, max_tokens: int, stream: bool) -> tuple[float, str]:
    body = {"model": model, "max_tokens": max_tokens, "temperature": 0, "stream": stream,
            "messages": [{"role": "user", "content": PROMPT}]}  # fmt: skip
    start = time.perf_counter()
    if not stream:
        reply = client.post("/v1/chat/completions", json=body).json()
        return time.perf_counter() - start, reply["choices"][0]["message"]["content"]
    text = []
    with client.stream("POST", "/v1/chat/completions", json=body) as response:
        for line in response.iter_lines():
            if line.startswith("data: {"):
                choices = httpx.Response(200, content=line[6:]).json()["choices"]
                text += [c["delta"].get("content") or "" for c in choices]
    return time.perf_counter() - start, "".join(text)


def _messages(client: httpx.Client, model: str, max_tokens: int, stream: bool) -> tuple[float, str]:
    body = {"model": model, "max_tokens": max_tokens, "temperature": 0, "stream": stream,
            "messages": [{"role": "user", "content": PROMPT}]}  # fmt: skip
    start = time.perf_counter()
    if not stream:
        reply = client.post("/v1/messages", json=body).json()
        return time.perf_counter() - start, "".join(b["text"] for b in reply["content"])
    text = []
    with client.stream("POST", "/v1/messages", json=body) as response:
        for line in response.iter_lines():
            if line.startswith("data: ") and '"text_delta"' in line:
                text.append(httpx.Response(200, content=line[6:]).json()["delta"]["text"])
    return time.perf_counter() - start, "".join(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gemma3-270m")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    argv = [sys.executable, "-m", "ember", "serve", "--port", str(port), "--model", args.model]
    argv += ["--threads", str(args.threads)] if args.threads else []
    proc = subprocess.Popen(argv, cwd=ROOT)
    try:
        _wait_healthy(url, proc)
        with httpx.Client(base_url=url, timeout=600) as client:
            for stream in (False, True):
                _chat(client, args.model, args.max_tokens, stream)  # warm both paths
                _messages(client, args.model, args.max_tokens, stream)
                ratios, chat_s, msg_s = [], [], []
                for i in range(args.rounds):
                    pair = [_chat, _messages] if i % 2 == 0 else [_messages, _chat]
                    times = {f: f(client, args.model, args.max_tokens, stream) for f in pair}
                    (c, ctext), (m, mtext) = times[_chat], times[_messages]
                    assert ctext == mtext, (ctext, mtext)
                    ratios.append(m / c)
                    chat_s.append(c)
                    msg_s.append(m)
                print(
                    f"{'streamed' if stream else 'whole'}: chat {statistics.median(chat_s) * 1e3:.1f} ms, "
                    f"messages {statistics.median(msg_s) * 1e3:.1f} ms, median ratio "
                    f"{statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f}; "
                    f"{args.rounds} rounds, {args.max_tokens} tokens, {_isa()})",
                    flush=True,
                )
    finally:
        proc.terminate()
        proc.wait(timeout=60)


if __name__ == "__main__":
    main()
