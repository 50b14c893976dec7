"""Fixtures for the TUI tests: a real History, a FakeBackend factory, a FakeCatalog, the app."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from textual.app import App
from textual.pilot import Pilot

from ember.app.catalog.catalog import LocalModel
from ember.app.catalog.fake import FakeCatalog
from ember.app.config import Settings
from ember.app.history.store import History
from ember.engine.api import EngineOptions
from ember.engine.errors import EngineError
from ember.paths import get_paths
from ember.tui.app import EmberApp
from ember.tui.fake_backend import FakeBackend, FakeScript

SIZE = (110, 36)


class Backends:
    """A backend factory that records what it built; `fail` makes the next loads fail."""

    def __init__(self) -> None:
        self.script = FakeScript(replies=["Hello **there**, friend."], tokens_per_s=0)
        self.built: list[FakeBackend] = []
        self.fail: str = ""

    def __call__(self, options: EngineOptions) -> FakeBackend:
        if self.fail:
            raise EngineError(self.fail)
        backend = FakeBackend(options, self.script)
        self.built.append(backend)
        return backend

    @property
    def last(self) -> FakeBackend:
        return self.built[-1]


@pytest.fixture
def history(ember_home: Path) -> Iterator[History]:
    h = History.open(get_paths().history_db)
    yield h
    h.close()


@pytest.fixture
def backends() -> Backends:
    return Backends()


@pytest.fixture
def catalog() -> FakeCatalog:
    return FakeCatalog(
        models=[
            LocalModel("gemma3-270m", 253_000_000, "Q4_K_M", "gemma3", 1_700_000_000.0),
            LocalModel("qwen3-0.6b", 480_000_000, "Q8_0", "qwen3", None),
        ]
    )


@pytest.fixture
def make_app(history: History, backends: Backends, catalog: FakeCatalog) -> Callable[..., EmberApp]:
    def make(settings: Settings | None = None, **kwargs: object) -> EmberApp:
        return EmberApp(settings or Settings(), history, backends, catalog, **kwargs)  # type: ignore[arg-type]

    return make


async def wait_for(pilot: Pilot, condition: Callable[[], object], timeout_s: float = 10.0) -> None:
    """Let the app run until condition() is true (fails the test after timeout_s)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s}s")
        # a plain sleep lets the app run; pilot.pause() would also wait for every message queue
        # to drain, which takes long while a reply streams
        await asyncio.sleep(0.01)


async def send(pilot: Pilot, text: str) -> None:
    """Type text in the prompt and press Enter."""
    prompt = pilot.app.screen.query_one("#prompt")
    prompt.focus()
    prompt.load_text(text)  # type: ignore[attr-defined]
    await pilot.press("enter")


async def wait_idle(pilot: Pilot) -> None:
    """Wait until no reply is streaming."""
    await wait_for(pilot, lambda: not pilot.app.session.busy)  # type: ignore[attr-defined]
    await pilot.pause()


async def send_turns(pilot: Pilot, *texts: str) -> None:
    """Send each text in turn, waiting for its reply to finish before the next."""
    for text in texts:
        await send(pilot, text)
        await wait_idle(pilot)


def screen_text(app: App[None]) -> str:
    """The current screen as plain text, one line per terminal row.

    Read from the public App.export_screenshot: its SVG holds one <text> per run of cells,
    clipped to its row (`...line-N`) and placed at x = column * cell width.
    """
    from xml.etree import ElementTree

    from rich.cells import cell_len

    root = ElementTree.fromstring(app.export_screenshot(simplify=True))
    runs: list[tuple[int, float, str]] = []
    cell_width = 0.0
    for node in root.iter("{http://www.w3.org/2000/svg}text"):
        row = re.search(r"line-(\d+)\)", node.get("clip-path", ""))
        text = (node.text or "").replace("\xa0", " ")
        if row is None or not text:
            continue
        if not cell_width:
            cell_width = float(node.get("textLength", "0")) / len(text)
        runs.append((int(row.group(1)), float(node.get("x", "0")), text))
    width, height = app.size
    rows = [[" "] * width for _ in range(height)]
    for row_index, x, text in runs:
        column = round(x / cell_width)
        for char in text:
            if row_index < height and column < width:
                rows[row_index][column] = char
                for cell in range(1, cell_len(char)):  # a wide character covers two cells
                    if column + cell < width:
                        rows[row_index][column + cell] = ""
            column += cell_len(char)
    return "\n".join("".join(row).rstrip() for row in rows)


class ConsentClock:
    """The tool-consent dialogs' clock (tui/screens/tool_consent.py `now`), moved by the test:
    keys count only once `pass_debounce` has moved it past the dialog's debounce."""

    def __init__(self) -> None:
        self.now_s = 1000.0

    def __call__(self) -> float:
        return self.now_s

    def pass_debounce(self) -> None:
        from ember.tui.screens.tool_consent import DEBOUNCE_S

        self.now_s += DEBOUNCE_S + 0.01


@pytest.fixture
def consent_clock(monkeypatch: pytest.MonkeyPatch) -> ConsentClock:
    from ember.tui.screens import tool_consent

    clock = ConsentClock()
    monkeypatch.setattr(tool_consent, "now", clock)
    return clock
