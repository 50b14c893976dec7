"""The models screen: local list, delete with confirm, Hub search, quant picker, downloads."""

from __future__ import annotations

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable

from ember.tui.app import EmberApp
from ember.tui.screens.models import ModelsScreen
from ember.tui.widgets.download_row import DownloadRow
from ember.tui.widgets.status_bar import StatusBar

from .conftest import SIZE, screen_text, send, wait_for, wait_idle

pytestmark = pytest.mark.anyio


async def _open(pilot: Pilot[None], app: EmberApp) -> ModelsScreen:
    await pilot.press("ctrl+o")
    await wait_for(pilot, lambda: isinstance(app.screen, ModelsScreen))
    await pilot.pause()
    screen = app.screen
    assert isinstance(screen, ModelsScreen)
    return screen


async def test_local_models_listed_and_deleted_with_confirm(make_app, catalog) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(pilot, app)
        text = screen_text(app)
        assert "gemma3-270m" in text and "253.0 MB" in text and "Q4_K_M" in text
        assert "qwen3" in text and "never" in text and "fits" in text
        await pilot.press("down", "d")  # the second row: qwen3-0.6b
        await pilot.press("n")
        assert len(catalog.models) == 2
        await pilot.press("d", "y")
        await wait_for(pilot, lambda: [m.name for m in catalog.models] == ["gemma3-270m"])
        assert screen.query_one("#local", DataTable).row_count == 1


async def test_use_model_in_current_chat(make_app, history, backends) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await _open(pilot, app)
        await pilot.press("down", "u")
        await wait_for(pilot, lambda: not isinstance(app.screen, ModelsScreen))
        await wait_for(pilot, lambda: app.screen.query_one(StatusBar).info.model == "qwen3-0.6b")
        await send(pilot, "hi")
        await wait_idle(pilot)
        assert backends.last.options.model == "qwen3-0.6b"


async def test_search_quants_download_cancel_resume(make_app, catalog) -> None:
    catalog.download_steps = 4
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(pilot, app)
        await pilot.press("slash", *"qwen", "enter")
        hub = screen.query_one("#hub", DataTable)
        await wait_for(pilot, lambda: hub.row_count == 1)
        hub.focus()
        await pilot.press("enter")
        quants = screen.query_one("#quants", DataTable)
        await wait_for(pilot, lambda: quants.row_count == 3)
        text = screen_text(app)
        assert "Q4_K_M" in text and "too big" in text  # the F16 file is 1 PB

        catalog.release.clear()  # hold the transfer so it can be cancelled mid-way
        await pilot.press("enter")
        row = screen.query_one(DownloadRow)
        await wait_for(pilot, lambda: row.has_focus)
        await pilot.press("x")
        catalog.release.set()
        await wait_for(pilot, lambda: row.state == "cancelled")
        assert len(catalog.models) == 2

        await pilot.press("r")
        await wait_for(pilot, lambda: row.state == "done")
        assert catalog.models[-1].name == "qwen3-0.6b-q4_k_m"
        await wait_for(pilot, lambda: screen.query_one("#local", DataTable).row_count == 3)


async def test_download_failure_notifies(make_app, catalog) -> None:
    catalog.download_error = "HTTP 404 for file"
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(pilot, app)
        screen.query_one("#hub", DataTable).focus()
        await pilot.press("enter")
        quants = screen.query_one("#quants", DataTable)
        await wait_for(pilot, lambda: quants.row_count == 3)
        await pilot.press("enter")
        row = screen.query_one(DownloadRow)
        await wait_for(pilot, lambda: row.state.startswith("failed"))
        assert any("HTTP 404" in str(n.message) for n in app._notifications)
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, ModelsScreen))


async def test_offline_hub_reads_as_offline_and_toasts_say_it_once(make_app, catalog) -> None:
    catalog.offline_mode = True
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(pilot, app)
        text = screen_text(app)
        assert "Hub (offline: HF_HUB_OFFLINE=1 or --offline" in text
        assert "Offline: Hub search is off" in text
        hub = screen.query_one("#hub", DataTable)
        rows = [[str(c) for c in hub.get_row_at(i)] for i in range(hub.row_count)]
        assert rows and all(row[1] != "0" and row[2] != "0" for row in rows)
        assert rows[0][3] == "Gemma 3 270M, tiny and quick"  # what the entry is, not counts
        screen.query_one("#hub").focus()
        await pilot.press("enter")  # a curated repo: listing its quants needs the Hub
        await wait_for(pilot, lambda: len(app._notifications) > 0)
        (note,) = list(app._notifications)
        assert note.title == "unsloth/gemma-3-270m-it-GGUF"
        assert str(note.message) == "offline mode is on; cannot list the repo on the Hub"


async def test_search_error_toast_has_its_subject_once(make_app, catalog) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await _open(pilot, app)
        catalog.offline_mode = True  # went offline after the screen opened
        await pilot.press("slash", *"qwen", "enter")
        await wait_for(pilot, lambda: len(app._notifications) > 0)
        (note,) = list(app._notifications)
        assert (note.title, str(note.message)) == (
            "Hub search",
            "offline mode is on (HF_HUB_OFFLINE=1 or --offline)",
        )
