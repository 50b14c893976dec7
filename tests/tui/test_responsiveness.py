"""While a reply streams at >= 200 tokens/s, a key press is handled within 50 ms (the issue's spec).

Measured from the moment the key event is posted (as the terminal driver does) to the end of the
prompt's key handler. The assertion is on the 90th percentile of 30 presses: on the shared 2-core
CI box a single press can land behind a screen refresh that the OS has descheduled; the slowest
press is printed with the median so a regression shows in the log.
"""

from __future__ import annotations

import asyncio
import statistics
import time

import pytest
from textual import events

from ember.app.config import Settings
from ember.tui.widgets.prompt_input import PromptInput

from .conftest import SIZE, send, wait_for, wait_idle

pytestmark = pytest.mark.anyio

KEY_BUDGET_S = 0.050
MIN_STREAM_TOK_S = 200.0


async def test_keys_stay_responsive_while_streaming(make_app, backends, monkeypatch) -> None:
    latencies: list[float] = []
    original = PromptInput._on_key

    async def timed(self: PromptInput, event: events.Key) -> None:
        await original(self, event)
        if event.key == "x":
            latencies.append(time.monotonic() - event.time)  # event.time: when the key was sent

    monkeypatch.setattr(PromptInput, "_on_key", timed)
    paragraph = ("tok " * 12 + "\n") * 5 + "\n"  # 60 tokens in 5 lines
    backends.script.replies = [paragraph * 400]
    backends.script.tokens_per_s = 300.0
    app = make_app(Settings(max_tokens=100_000))
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "stream fast")
        chat = app.screen
        await wait_for(
            pilot, lambda: chat.generation is not None and len(chat.generation.text) > 400
        )
        generation = chat.generation
        start_chars, start = len(generation.text), time.monotonic()
        prompt = chat.query_one(PromptInput)
        for count in range(1, 31):
            # the way a terminal delivers a key: an event posted to the app (pilot.press would
            # also wait for the app to go idle, which a busy stream delays)
            app.post_message(events.Key("x", "x"))
            # plain sleeps: pilot.pause() would force extra screen refreshes and skew the numbers
            while len(latencies) < count:
                await asyncio.sleep(0.005)
            await asyncio.sleep(0.05)  # spread the presses over the stream
        streamed_tokens = (len(generation.text) - start_chars) / len(paragraph) * 60
        tok_s = streamed_tokens / (time.monotonic() - start)
        last = app.history.path(chat.conversation.id)[-1]
        assert chat.generation is generation, (
            last.status,
            len(last.content),
            [str(n.message) for n in app._notifications],
        )
        assert prompt.text == "x" * 30
        await pilot.press("escape")
        await wait_idle(pilot)
    ordered = sorted(latencies)
    p90 = ordered[int(0.9 * len(ordered)) - 1]
    print(
        f"stream {tok_s:.0f} tok/s; key latency median {statistics.median(latencies) * 1000:.1f} ms,"
        f" p90 {p90 * 1000:.1f} ms, max {max(latencies) * 1000:.1f} ms"
    )
    assert tok_s >= MIN_STREAM_TOK_S
    assert len(latencies) == 30
    assert p90 < KEY_BUDGET_S, f"90% of key presses took up to {p90 * 1000:.1f} ms"
