"""What one chat uses: its model (switch, or pull a new one), its thinking switch, its system
prompt preset and its settings. Functions of the ChatScreen they act on."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ember.tui.chat.session import ChatBusy
from ember.tui.notices import notify_error
from ember.tui.screens.chat.settings import ChatSettingsDialog
from ember.tui.screens.dialogs import PickDialog
from ember.tui.screens.presets import PresetChoice, PresetDialog

if TYPE_CHECKING:
    from ember.tui.screens.chat.screen import ChatScreen


def toggle_thinking(screen: ChatScreen) -> None:
    """This chat's thinking switch, where the model's template has one."""
    session = screen.session
    info = session.host.info
    if info is not None and not info.features.get("thinking_switch"):
        notify_error(screen, "Thinking", f"{info.model}'s chat template has no thinking switch")
        return
    current = session.thinking
    session.set_thinking(not (True if current is None else current))
    state = "on" if session.thinking else "off"
    screen.notify(f"thinking {state} for this chat (from the next reply)")


async def switch_model(screen: ChatScreen) -> None:
    """Pick a local model for this chat (it loads in the background)."""
    names = screen.ember.model_names()
    if not names:
        screen.notify("no local models yet: pull one (Ctrl+O)")
        return
    current = screen.session.model
    choice = await screen.app.push_screen_wait(PickDialog("Model for this chat", names, current))
    if choice is None or choice == current:
        return
    if screen.session.busy:
        notify_error(screen, "Switch model", ChatBusy())
        return
    screen.session.use_model(choice)
    await screen.refresh_list()
    screen.update_status()
    screen.ember.preload(choice)
    screen.notify(f"this chat now uses {choice}", markup=False)


def pull_model(screen: ChatScreen) -> None:
    """The models screen with the Hub search focused."""
    from ember.tui.screens.models import ModelsScreen

    models = ModelsScreen()
    screen.app.push_screen(models)
    models.call_after_refresh(models.action_search)


async def pick_preset(screen: ChatScreen) -> None:
    """Pick, create or edit a system prompt preset for this chat."""
    session = screen.session
    conv = session.ensure_conversation()
    choice: PresetChoice | None = await screen.app.push_screen_wait(
        PresetDialog(session.history, conv.preset_id, conv.system_prompt)
    )
    if choice is not None:
        session.update(preset_id=choice.preset_id, system_prompt=choice.system_prompt)
        await screen.refresh_list()  # the chat may be new
        label = "cleared" if not choice.system_prompt.strip() else "set for this chat"
        screen.notify(f"System prompt {label}")


async def use_preset(screen: ChatScreen, preset_id: int) -> None:
    """Make a preset this chat's system prompt (the palette's `System prompt: NAME`)."""
    session = screen.session
    preset = next((p for p in session.history.list_presets() if p.id == preset_id), None)
    if preset is None:
        return
    session.update(preset_id=preset.id, system_prompt=preset.content)
    await screen.refresh_list()
    screen.notify(f"System prompt {preset.name!r} set for this chat", markup=False)


async def edit_settings(screen: ChatScreen) -> None:
    """This chat's model and sampling settings (a dialog); the model preloads."""
    session = screen.session
    conv = session.ensure_conversation()
    result: dict[str, Any] | None = await screen.app.push_screen_wait(
        ChatSettingsDialog(conv.settings, session.settings, screen.ember.model_names())
    )
    if result is None:
        return
    session.update(settings=result)
    await screen.refresh_list()  # the chat may be new
    screen.update_status()
    screen.ember.preload(session.model)
