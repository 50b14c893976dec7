"""The settings screen saves defaults to the config file; new chats use them."""

from __future__ import annotations

import pytest

from ember.app.config import load_settings
from ember.tui.screens.settings import SettingsScreen

from .conftest import SIZE, send, wait_for, wait_idle

pytestmark = pytest.mark.anyio


async def test_save_settings_applies_to_new_chats(make_app, history, backends) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "old chat")
        await wait_idle(pilot)
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, SettingsScreen))
        screen = app.screen
        screen.query_one("#field-temperature").value = "0.2"
        screen.query_one("#field-ctx").value = "2048"
        screen.query_one("#field-system_prompt").value = "Be brief."
        screen.query_one("#field-model").value = "qwen3-0.6b"
        screen.query_one("#field-prefix_cache").value = False
        await pilot.pause()
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: not isinstance(app.screen, SettingsScreen))
        saved = load_settings()
        assert (saved.temperature, saved.ctx, saved.system_prompt) == (0.2, 2048, "Be brief.")
        assert (saved.model, saved.prefix_cache) == ("qwen3-0.6b", False)

        # the open chat keeps its settings; a new chat takes the new defaults
        await send(pilot, "old chat again")
        await wait_idle(pilot)
        assert backends.last.requests[-1].sampling.temperature == 0.7
        await pilot.press("ctrl+n")
        await send(pilot, "new chat")
        await wait_idle(pilot)
        request = backends.last.requests[-1]
        assert request.sampling.temperature == 0.2
        assert request.messages[0].content == "Be brief."
        assert backends.last.options.model == "qwen3-0.6b"
        assert backends.last.options.ctx == 2048 and backends.last.options.prefix_cache is False


async def test_invalid_setting_is_not_saved(make_app, history) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, SettingsScreen))
        app.screen.query_one("#field-ctx").value = "3"
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert isinstance(app.screen, SettingsScreen)
        assert any("ctx" in str(n.message) for n in app._notifications)
        assert not app.paths.config_file.exists()
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, SettingsScreen))
