"""While a model loads (or a long prompt is prefilled) the status bar says what and how far: the
engine's progress callbacks reach it through ChatSession.load."""

from __future__ import annotations

import threading

import pytest

from ember.engine.api import EngineOptions
from ember.tui.fake_backend import FakeBackend
from ember.tui.widgets.status_bar import StatusBar

from .conftest import SIZE, Backends, send, wait_for, wait_idle

pytestmark = pytest.mark.anyio


class PackingBackends(Backends):
    """Loads report packing progress, then wait for the test to let them finish."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def __call__(self, options: EngineOptions) -> FakeBackend:
        assert options.progress is not None
        options.progress("packing weights (first run of this model)", 7, 18)
        self.release.wait(30)
        options.progress("packing weights (first run of this model)", 18, 18)
        return super().__call__(options)


async def test_the_status_bar_shows_what_a_load_is_doing_and_how_far(history, catalog) -> None:
    from ember.app.config import Settings
    from ember.tui.app import EmberApp

    backends = PackingBackends()
    app = EmberApp(Settings(), history, backends, catalog)
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "hello")
        bar = app.screen.query_one(StatusBar)
        await wait_for(pilot, lambda: "packing weights" in bar.info.render_line())
        assert "packing weights (first run of this model) 7/18" in bar.info.render_line()
        backends.release.set()
        await wait_idle(pilot)
        assert "packing weights" not in bar.info.render_line()
