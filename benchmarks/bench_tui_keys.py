"""Key latency of the chat app while a reply streams fast (FakeBackend: no model, no terminal).

    python benchmarks/bench_tui_keys.py [--presses 30] [--tok-s 300] [--budget-ms 50] [--no-check]

A key is timed from the moment its event is posted to the app (as the terminal driver does) to
the end of the prompt's key handler. Prints the stream rate and the median, 90th percentile and
max latency; exits 1 when the stream is slower than 200 tok/s or the 90th percentile misses the
budget (--no-check only prints). Targets: >= 200 tok/s streamed, p90 < 50 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

MIN_STREAM_TOK_S = 200.0
PARAGRAPH = ("tok " * 12 + "\n") * 5 + "\n"  # 60 tokens in 5 lines


async def _measure(presses: int, tok_s: float, latencies: list[float]) -> float:
    """Stream a long reply, post `presses` keys spread over it; returns the streamed tok/s."""
    from textual import events

    from ember.app.catalog.fake import FakeCatalog
    from ember.app.config import Settings
    from ember.app.history.store import History
    from ember.paths import get_paths
    from ember.tui.app import EmberApp
    from ember.tui.fake_backend import FakeBackend, FakeScript
    from ember.tui.widgets.prompt_input import PromptInput

    script = FakeScript(replies=[PARAGRAPH * 400], tokens_per_s=tok_s)
    history = History.open(get_paths().history_db)
    app = EmberApp(
        Settings(max_tokens=100_000),
        history,
        lambda options: FakeBackend(options, script),
        FakeCatalog(),
        first_run_check=False,
    )
    try:
        async with app.run_test(size=(110, 36)) as pilot:
            prompt = app.screen.query_one(PromptInput)
            prompt.load_text("stream fast")
            await pilot.press("enter")
            session = app.session
            await _until(lambda: session.reply is not None and len(session.reply.text) > 400)
            reply = session.reply
            assert reply is not None
            start_chars, start = len(reply.text), time.monotonic()
            for count in range(1, presses + 1):
                # pilot.press would wait for the app to go idle, which a busy stream delays
                app.post_message(events.Key("x", "x"))
                await _until(lambda: len(latencies) >= count)  # noqa: B023 - awaited here
                await asyncio.sleep(0.05)  # spread the presses over the stream
            streamed = (len(reply.text) - start_chars) / len(PARAGRAPH) * 60
            rate = streamed / (time.monotonic() - start)
            if session.reply is not reply or prompt.text != "x" * presses:
                raise SystemExit("the stream ended or keys were lost while measuring")
            await pilot.press("escape")
            await _until(lambda: not session.busy)
    finally:
        history.close()
    return rate


async def _until(condition: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"condition not met within {timeout_s} s")
        await asyncio.sleep(0.005)  # plain sleeps: pilot.pause() would add screen refreshes


def _timed_prompt(latencies: list[float]) -> None:
    """Wrap the prompt's key handler to record each 'x' key's latency."""
    from textual import events

    from ember.tui.widgets.prompt_input import PromptInput

    original = PromptInput._on_key

    async def timed(self: PromptInput, event: events.Key) -> None:
        await original(self, event)
        if event.key == "x":
            latencies.append(time.monotonic() - event.time)  # event.time: when it was posted

    PromptInput._on_key = timed  # type: ignore[method-assign]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presses", type=int, default=30)
    parser.add_argument("--tok-s", type=float, default=300.0, help="the fake stream's rate")
    parser.add_argument("--budget-ms", type=float, default=50.0, help="p90 latency target")
    parser.add_argument("--no-check", action="store_true", help="print only; always exit 0")
    args = parser.parse_args(argv)
    latencies: list[float] = []
    _timed_prompt(latencies)
    with tempfile.TemporaryDirectory() as home:
        os.environ["EMBER_HOME"] = home
        rate = asyncio.run(_measure(args.presses, args.tok_s, latencies))
    ordered = sorted(latencies)
    p90 = ordered[max(int(0.9 * len(ordered)) - 1, 0)]
    print(
        f"stream {rate:.0f} tok/s; key latency over {len(latencies)} presses: median "
        f"{statistics.median(latencies) * 1000:.1f} ms, p90 {p90 * 1000:.1f} ms, "
        f"max {max(latencies) * 1000:.1f} ms (target p90 < {args.budget_ms:g} ms)"
    )
    if args.no_check:
        return 0
    return 0 if rate >= MIN_STREAM_TOK_S and p90 * 1000 < args.budget_ms else 1


if __name__ == "__main__":
    sys.exit(main())
