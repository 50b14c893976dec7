"""First run: with no models, offer the starter model, else the curated list."""

from __future__ import annotations

import pytest

from ember.tui.screens.first_run import FirstRunScreen
from ember.tui.screens.models import ModelsScreen
from ember.tui.widgets.download_row import DownloadRow

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


def _labels(app: object) -> str:
    """The screen's labels as one line each (screen_text wraps them inside the dialog)."""
    from textual.widgets import Label

    return "\n".join(str(label.render()) for label in app.screen.query(Label))  # type: ignore[attr-defined]


async def test_says_the_starter_is_a_base_model_and_offers_its_sibling(make_app, catalog) -> None:
    catalog.models = []
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, FirstRunScreen))
        text = _labels(app)
        assert "base (pretrained) model" in text and "few-shot conversation" in text
        assert "instruction-tuned sibling (unsloth/gemma-3-270m-it-GGUF Q4_K_M, 253.0 MB)" in text
        await pilot.press("i")
        await wait_for(pilot, lambda: isinstance(app.screen, ModelsScreen))
        await wait_for(pilot, lambda: any(r.state == "done" for r in app.screen.query(DownloadRow)))
        row = app.screen.query_one(DownloadRow)
        assert (row.repo_id, row.filename) == ("unsloth/gemma-3-270m-it-GGUF", "Q4_K_M")
        assert [m.name for m in catalog.models] == ["q4_k_m"]  # FakeCatalog's name for it


async def test_no_sibling_offer_when_the_hub_is_off(make_app, catalog) -> None:
    catalog.models = []
    catalog.sibling = False
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, FirstRunScreen))
        text = _labels(app)
        assert "base (pretrained) model" in text and "sibling" not in text
        assert "sibling" not in screen_text(app)  # nor its button
        await pilot.press("i")  # nothing to download: the screen stays
        await pilot.pause()
        assert isinstance(app.screen, FirstRunScreen)


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
