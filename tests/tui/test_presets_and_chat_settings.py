"""System prompt presets (create, edit, pick per chat) and per-chat model and sampling settings."""

from __future__ import annotations

import pytest
from textual.pilot import Pilot
from textual.screen import Screen
from textual.widgets import Input, TextArea

from ember.tui.screens.chat.settings import ChatSettingsDialog
from ember.tui.screens.presets import PresetDialog
from ember.tui.widgets.status_bar import StatusBar

from .conftest import SIZE, send, wait_for, wait_idle

pytestmark = pytest.mark.anyio


async def _set_field(pilot: Pilot[None], screen: Screen[object], selector: str, value: str) -> None:
    # a dialog is the screen before its form has composed its fields (seen on a loaded machine)
    await wait_for(pilot, lambda: bool(screen.query(selector)))
    widget = screen.query_one(selector)
    if isinstance(widget, TextArea):
        widget.load_text(value)
    else:
        assert isinstance(widget, Input)
        widget.value = value
    await pilot.pause()


async def test_create_edit_and_pick_preset(make_app, history, backends) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+t")
        await wait_for(pilot, lambda: isinstance(app.screen, PresetDialog))
        dialog = app.screen
        await pilot.press("ctrl+n")
        await _set_field(pilot, dialog, "#preset-name", "Pirate")
        await _set_field(pilot, dialog, "#preset-text", "Talk like a pirate.")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: [p.name for p in history.list_presets()] == ["Pirate"])
        # edit it in place
        await _set_field(pilot, dialog, "#preset-text", "Talk like a pirate, briefly.")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: history.list_presets()[0].content.endswith("briefly."))
        assert len(history.list_presets()) == 1
        await pilot.press("ctrl+u")
        await wait_for(pilot, lambda: not isinstance(app.screen, PresetDialog))

        await send(pilot, "ahoy")
        await wait_idle(pilot)
        messages = backends.last.requests[-1].messages
        assert (messages[0].role, messages[0].content) == ("system", "Talk like a pirate, briefly.")
        conv = history.conversation(app.session.conversation.id)
        assert conv.preset_id == history.list_presets()[0].id

        # a new chat starts from the default (empty) system prompt; pick the preset by name
        await pilot.press("ctrl+n")
        await pilot.press("ctrl+t")
        await wait_for(pilot, lambda: isinstance(app.screen, PresetDialog))
        app.screen.query_one("#preset-list").focus()
        await pilot.press("down")
        assert app.screen.query_one("#preset-name", Input).value == "Pirate"
        await pilot.press("ctrl+u")
        await wait_for(pilot, lambda: not isinstance(app.screen, PresetDialog))
        await send(pilot, "again")
        await wait_idle(pilot)
        assert backends.last.requests[-1].messages[0].content == "Talk like a pirate, briefly."


async def test_preset_dialog_cancel_changes_nothing(make_app, history) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+t")
        await wait_for(pilot, lambda: isinstance(app.screen, PresetDialog))
        await _set_field(pilot, app.screen, "#preset-text", "ignored")
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, PresetDialog))
        assert history.conversation(app.session.conversation.id).system_prompt == ""


async def test_per_chat_sampling_and_model_switch(make_app, history, backends) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "first")
        await wait_idle(pilot)
        assert backends.last.options.model == "gemma3-270m"
        await pilot.press("ctrl+g")
        await wait_for(pilot, lambda: isinstance(app.screen, ChatSettingsDialog))
        dialog = app.screen
        await _set_field(pilot, dialog, "#field-temperature", "0")
        await _set_field(pilot, dialog, "#field-max_tokens", "2")
        await _set_field(pilot, dialog, "#field-seed", "42")
        dialog.query_one("#field-model").value = "qwen3-0.6b"
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: not isinstance(app.screen, ChatSettingsDialog))
        await wait_for(pilot, lambda: app.screen.query_one(StatusBar).info.model == "qwen3-0.6b")
        await send(pilot, "second")
        await wait_idle(pilot)
        assert [b.options.model for b in backends.built] == ["gemma3-270m", "qwen3-0.6b"]
        assert backends.built[0].closed  # the old model was unloaded
        sampling = backends.last.requests[-1].sampling
        assert (sampling.temperature, sampling.max_tokens, sampling.seed) == (0.0, 2, 42)
        assert history.path(app.session.conversation.id)[-1].content == "Hello **there**,"
        # other chats keep the defaults
        await pilot.press("ctrl+n")
        await send(pilot, "third")
        await wait_idle(pilot)
        assert backends.last.options.model == "gemma3-270m"
        assert backends.last.requests[-1].sampling.temperature == 0.7


async def test_invalid_chat_setting_is_refused(make_app, history) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+g")
        await wait_for(pilot, lambda: isinstance(app.screen, ChatSettingsDialog))
        await _set_field(pilot, app.screen, "#field-top_p", "0")
        await pilot.press("ctrl+s")
        assert isinstance(app.screen, ChatSettingsDialog)
        assert any("top_p" in str(n.message) for n in app._notifications)
