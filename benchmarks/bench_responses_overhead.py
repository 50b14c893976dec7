"""What /v1/responses adds over the same request on /v1/chat/completions (bench_api_overhead.py
does the same for /v1/messages, whose helpers this reuses).

Starts a real `ember serve`, sends the same conversation (greedy, same max tokens) to both
routes taking turns round by round, whole and streamed, checks both replies are the same text,
and prints the median of the per-round time ratios (responses / chat). Usage:
    python benchmarks/bench_responses_overhead.py [--model gemma3-270m] [--max-tokens 32] [--rounds 15]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.bench_api_overhead import (  # noqa: E402
    PROMPT,
    ROOT,
    _chat,
    _free_port,
    _isa,
    _wait_healthy,
)


def _responses(
    client: httpx.Client, model: str, max_tokens: int, stream: bool
) -> tuple[float, str]:
    body = {"model": model, "max_output_tokens": max_tokens, "temperature": 0, "stream": stream,
            "input": PROMPT, "store": False}  # fmt: skip
    start = time.perf_counter()
    if not stream:
        reply = client.post("/v1/responses", json=body).json()
        text = "".join(
            p["text"] for i in reply["output"] if i["type"] == "message" for p in i["content"]
        )
        return time.perf_counter() - start, text
    parts = []
    with client.stream("POST", "/v1/responses", json=body) as response:
        for line in response.iter_lines():
            if line.startswith("data: ") and '"response.output_text.delta"' in line:
                parts.append(json.loads(line[6:])["delta"])
    return time.perf_counter() - start, "".join(parts)


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
                _responses(client, args.model, args.max_tokens, stream)
                ratios, chat_s, resp_s = [], [], []
                for i in range(args.rounds):
                    pair = [_chat, _responses] if i % 2 == 0 else [_responses, _chat]
                    times = {f: f(client, args.model, args.max_tokens, stream) for f in pair}
                    (c, ctext), (r, rtext) = times[_chat], times[_responses]
                    assert ctext == rtext, (ctext, rtext)
                    ratios.append(r / c)
                    chat_s.append(c)
                    resp_s.append(r)
                print(
                    f"{'streamed' if stream else 'whole'}: chat {statistics.median(chat_s) * 1e3:.1f} ms, "
                    f"responses {statistics.median(resp_s) * 1e3:.1f} ms, median ratio "
                    f"{statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f}; "
                    f"{args.rounds} rounds, {args.max_tokens} tokens, {_isa()})",
                    flush=True,
                )
    finally:
        proc.terminate()
        proc.wait(timeout=60)


if __name__ == "__main__":
    main()
