"""Hostile chat templates: peak RSS and time of each render, one fresh process per template.

Run by hand from the checkout root: python -m benchmarks.bench_template_limits [timeout_s]
Each template runs in its own interpreter (so peak RSS is that render's) with a wall-clock
timeout (default 120 s) and a 3 GiB address-space cap (so an unbounded render ends in
MemoryError instead of taking the machine); it prints seconds, peak RSS in MiB and how the render
ended. Then the median time of rendering a benign 200-message Qwen3-style conversation (the cost
of the checks). To measure another checkout, run this file from that checkout's root with its
interpreter: cd OTHER && .venv/bin/python /path/to/bench_template_limits.py
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

BIG = "{% set a = 'a' * 4000000 %}"
ATTACKS = {
    "list of refs printed": BIG + "{{ [a] * 1000 }}",
    "list of refs joined": BIG + "{{ ([a] * 1000) | join }}",
    "map(center) | list": "{{ range(1000) | map('center', 4000000) | list | length }}",
    "set block of outputs": BIG
    + "{% set x %}{% for i in range(100000) %}{{ a }}{% endfor %}{% endset %}{{ x | length }}",
    "ten slices": BIG + "{{ [" + ", ".join(f"a[{i}:]" for i in range(1, 11)) + "] | length }}",
    "chained replace": BIG + "{{ a | replace('a', 'bb') | replace('b', 'cc') | length }}",
    "tojson of refs": BIG + "{{ ([a] * 1000) | tojson | length }}",
    "string of refs": BIG + "{{ ([a] * 1000) | string | length }}",
    "printf of refs": BIG + "{{ '%s' % ([a] * 1000,) }}",
    "split into pieces": "{% set a = 'ab ' * 1300000 %}{{ a.split() | length }}",
    "nested loops": "{% for i in range(100000) %}{% for j in range(100000) %}"
    "{% endfor %}{% endfor %}",
}

_CHILD = """
import json, resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
from ember.models.text.templates.chat_template import ChatTemplate
source = sys.argv[1]
start = time.monotonic()
try:
    ChatTemplate(source, "bench").render([{"role": "user", "content": "hi"}])
    outcome = "rendered"
except Exception as exc:
    outcome = f"{type(exc).__name__}: {str(exc)[:90]}"
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"s": time.monotonic() - start, "mib": peak, "outcome": outcome}))
"""


def _attack(source: str, timeout_s: float) -> dict[str, object]:
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _CHILD, source],
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        return {"s": timeout_s, "mib": float("nan"), "outcome": f"killed after {timeout_s:g} s"}
    if proc.returncode != 0 or not proc.stdout.strip():
        return {"s": float("nan"), "mib": float("nan"), "outcome": proc.stderr.strip()[-90:]}
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def _benign_median_ms(repeats: int = 15) -> float:
    from ember.models.text.templates.chat_template import ChatTemplate
    from tests.fixtures.tiny_hf import QWEN3_TEMPLATE

    template = ChatTemplate(QWEN3_TEMPLATE, "bench")
    messages = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} " * 40}
        for i in range(200)
    ]
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        template.render_segments(messages)
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def main() -> None:
    sys.path.insert(0, os.getcwd())  # the checkout whose code is measured
    timeout_s = float(sys.argv[1]) if len(sys.argv) > 1 else 120.0
    print(f"{'template':<24} {'seconds':>8} {'peak MiB':>9}  outcome")
    for name, source in ATTACKS.items():
        row = _attack(source, timeout_s)
        print(f"{name:<24} {row['s']:>8.2f} {row['mib']:>9.0f}  {row['outcome']}")
    print(f"benign 200-message render_segments: median {_benign_median_ms():.1f} ms")


if __name__ == "__main__":
    main()
