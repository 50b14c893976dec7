"""Server throughput: requests/s and aggregate decode tok/s with 1, 4 and 8 streaming clients.

Starts a real `ember serve` on 127.0.0.1 with the given model, then runs each concurrency level
`--rounds` times (medians reported). Usage:
    python benchmarks/bench_server.py [--model gemma3-270m] [--max-tokens 64] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # `python -m ember` works from a checkout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_healthy(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"ember serve exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as reply:
                if json.load(reply)["loaded"]:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit("ember serve did not become healthy")


def _one_client(url: str, model: str, max_tokens: int, prompt: str, out: list[int]) -> None:
    import openai

    client = openai.OpenAI(base_url=f"{url}/v1", api_key="bench", max_retries=0, timeout=600)
    stream = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": prompt}], max_tokens=max_tokens,
        temperature=0, stream=True, stream_options={"include_usage": True},
    )
    tokens = 0
    for chunk in stream:
        if chunk.usage is not None:
            tokens = chunk.usage.completion_tokens
    out.append(tokens)


def _round(url: str, model: str, clients: int, max_tokens: int) -> tuple[float, int]:
    counts: list[int] = []
    prompts = [f"Write a short story about a lighthouse keeper, part {i}." for i in range(clients)]
    threads = [threading.Thread(target=_one_client, args=(url, model, max_tokens, p, counts))
               for p in prompts]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - start, sum(counts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="gemma3-270m")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runner", default="auto")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "ember", "serve", "--port", str(port), "--model", args.model,
           "--runner", args.runner]
    proc = subprocess.Popen(cmd, env=dict(os.environ), cwd=ROOT)
    rows = []
    try:
        _wait_healthy(url, proc)
        _round(url, args.model, 1, 8)  # warm-up
        for clients in (1, 4, 8):
            runs = [_round(url, args.model, clients, args.max_tokens) for _ in range(args.rounds)]
            secs = statistics.median(r[0] for r in runs)
            toks = statistics.median(r[1] for r in runs)
            rows.append({"clients": clients, "seconds": round(secs, 2),
                         "requests_per_s": round(clients / secs, 3), "tok_per_s": round(toks / secs, 1)})
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    if args.json:
        print(json.dumps(rows))
    else:
        print(f"{'clients':>7} {'req/s':>8} {'tok/s':>8} {'seconds':>8}")
        for r in rows:
            print(f"{r['clients']:>7} {r['requests_per_s']:>8} {r['tok_per_s']:>8} {r['seconds']:>8}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
