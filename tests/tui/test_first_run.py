"""First run: with no models, offer the starter model, else the curated list."""

from __future__ import annotations

import pytest

from ember.tui.screens.first_run import FirstRunScreen
from ember.tui.screens.models import ModelsScreen

from .conftest import SIZE, screen_text, send, wait_for, wait_idle

pytestmark = pytest.mark.anyio


async def test_offers_starter_and_installs_it(make_app, catalog, backends) -> None:
    catalog.models = []
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, FirstRunScreen))
        assert "starter model" in screen_text(app)
        await pilot.press("s")
        await wait_for(pilot, lambda: not isinstance(app.screen, FirstRunScreen))
        assert [m.name for m in catalog.models] == ["gemma3-270m"]
        await send(pilot, "hi")
        await wait_idle(pilot)
        assert backends.last.options.model == "gemma3-270m"


async def test_without_starter_shows_curated_list(make_app, catalog) -> None:
    catalog.models = []
    catalog.starter = False
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, FirstRunScreen))
        text = screen_text(app)
        assert "Qwen/Qwen3-0.6B-GGUF" in text and "Use the starter" not in text
        await pilot.press("m")
        await wait_for(pilot, lambda: isinstance(app.screen, ModelsScreen))


async def test_no_first_run_when_models_exist(make_app) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert not isinstance(app.screen, FirstRunScreen)
