"""Snapshot tests of the chat, models and settings screens (reviewed as PNGs before accepting)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable

from ember.app.history.store import History
from ember.tui.app import EmberApp
from ember.tui.widgets.prompt_input import PromptInput
from ember.tui.widgets.status_bar import StatusBar

from .conftest import SIZE, wait_for

SnapCompare = Callable[..., bool]  # pytest-textual-snapshot's fixture
MakeApp = Callable[..., EmberApp]  # conftest.make_app

REPLY = """Sure. Here is a **Python** function:

```python
def add(a: int, b: int) -> int:
    return a + b
```

- it is *typed*
- literal markup stays literal: [bold]not bold[/]
"""


@pytest.fixture(autouse=True)
def _fixed_clock_and_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    monkeypatch.setattr("ember.app.catalog.catalog.total_memory_bytes", lambda: 16 * 10**9)


def _seed_chat(history: History) -> None:
    old = history.create_conversation("Older chat")
    history.add_message(old.id, "user", "hello", None)
    conv = history.create_conversation("Python help")
    u = history.add_message(conv.id, "user", "Write an add function", None)
    history.add_message(conv.id, "assistant", "First try", u.id)
    history.add_message(conv.id, "assistant", REPLY, u.id)
    u2 = history.add_message(
        conv.id, "user", "Now a long essay please", history.path(conv.id)[-1].id
    )
    history.add_message(conv.id, "assistant", "Once upon a time", u2.id, status="stopped")


async def _settle(pilot: Pilot) -> None:
    await pilot.pause()
    if isinstance(pilot.app.focused, PromptInput):
        pilot.app.set_focus(None)  # a blinking cursor would make the picture random
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()


def test_chat_screen(snap_compare: SnapCompare, make_app: MakeApp, history: History) -> None:
    _seed_chat(history)

    async def before(pilot: Pilot) -> None:
        await wait_for(pilot, lambda: len(pilot.app.screen.query(".message")) == 4)
        bar = pilot.app.screen.query_one(StatusBar)
        info = bar.info
        info.runner, info.device, info.context_limit = "torch", "cpu", 4096
        info.context_tokens, info.evicted_tokens, info.ttft_s = 1024, 128, 0.125
        info.tok_s, info.cached_tokens, info.acceptance = 42.0, 512, 0.75
        bar.show()
        await _settle(pilot)

    assert snap_compare(make_app(), terminal_size=SIZE, run_before=before)


def test_models_screen(snap_compare: SnapCompare, make_app: MakeApp) -> None:
    async def before(pilot: Pilot) -> None:
        await pilot.press("ctrl+o")
        await wait_for(pilot, lambda: pilot.app.screen.query("#hub"))
        hub = pilot.app.screen.query_one("#hub")
        hub.focus()
        await pilot.press("down", "enter")
        await wait_for(
            pilot, lambda: pilot.app.screen.query_one("#quants", DataTable).row_count == 3
        )
        await _settle(pilot)

    assert snap_compare(make_app(), terminal_size=SIZE, run_before=before)


def test_settings_screen(snap_compare: SnapCompare, make_app: MakeApp) -> None:
    async def before(pilot: Pilot) -> None:
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: pilot.app.screen.query("#settings-form"))
        await _settle(pilot)

    assert snap_compare(make_app(), terminal_size=SIZE, run_before=before)
