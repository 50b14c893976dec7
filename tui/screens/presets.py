"""System prompt presets: pick one for this chat, create or edit them."""

from __future__ import annotations

from dataclasses import dataclass

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, ListItem, ListView, TextArea

from ember.app.history.store import History, Preset
from ember.errors import EmberError


@dataclass(frozen=True)
class PresetChoice:
    """The system prompt picked for the chat (preset_id None: typed by hand or none)."""

    preset_id: int | None
    system_prompt: str


class PresetItem(ListItem):
    def __init__(self, preset: Preset | None) -> None:
        super().__init__(Label(Content(preset.name if preset else "(no system prompt)")))
        self.preset = preset


class PresetDialog(ModalScreen[PresetChoice | None]):
    """List on the left; name and text of the highlighted preset on the right."""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel"),
        Binding("ctrl+s", "save", "Save preset", priority=True),
        Binding("ctrl+n", "new", "New preset", priority=True),
        Binding("ctrl+u", "use", "Use for chat", priority=True),
    ]

    def __init__(self, history: History, preset_id: int | None, system_prompt: str) -> None:
        super().__init__(classes="dialog-screen")
        self.history = history
        self.selected: Preset | None = None
        self._initial = (preset_id, system_prompt)

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog wide"):
            yield Label("System prompt presets")
            with Horizontal(id="preset-body"):
                yield ListView(id="preset-list")
                with Vertical(id="preset-editor"):
                    yield Input(placeholder="Preset name", id="preset-name")
                    yield TextArea(self._initial[1], id="preset-text", soft_wrap=True)
            with Horizontal(classes="dialog-buttons"):
                yield Button("Use (ctrl+u)", id="use", variant="primary")
                yield Button("Save (ctrl+s)", id="save")
                yield Button("New (ctrl+n)", id="new")
                yield Button("Cancel (esc)", id="cancel")

    async def on_mount(self) -> None:
        await self._reload(self._initial[0])

    async def _reload(self, select_id: int | None) -> None:
        view = self.query_one("#preset-list", ListView)
        await view.clear()
        presets = self.history.list_presets()
        await view.extend([PresetItem(None), *(PresetItem(p) for p in presets)])
        ids = [None, *(p.id for p in presets)]
        view.index = ids.index(select_id) if select_id in ids else 0
        self.selected = next((p for p in presets if p.id == select_id), None)
        if self.selected:
            self._fill(self.selected)

    def _fill(self, preset: Preset | None) -> None:
        self.query_one("#preset-name", Input).value = preset.name if preset else ""
        self.query_one("#preset-text", TextArea).load_text(preset.content if preset else "")

    @on(ListView.Highlighted, "#preset-list")
    def _highlighted(self, event: ListView.Highlighted) -> None:
        if isinstance(event.item, PresetItem) and event.item.preset is not self.selected:
            self.selected = event.item.preset
            self._fill(self.selected)

    async def action_save(self) -> None:
        name = self.query_one("#preset-name", Input).value
        text = self.query_one("#preset-text", TextArea).text
        try:
            saved = self.history.save_preset(
                name, text, self.selected.id if self.selected else None
            )
        except EmberError as exc:
            self.notify(str(exc), severity="error", markup=False)
            return
        await self._reload(saved.id)
        self.notify(f"saved preset {saved.name}", markup=False)

    def action_new(self) -> None:
        self.selected = None
        self.query_one("#preset-list", ListView).index = 0
        self._fill(None)
        self.query_one("#preset-name", Input).focus()

    def action_use(self) -> None:
        text = self.query_one("#preset-text", TextArea).text
        preset_id = self.selected.id if self.selected and self.selected.content == text else None
        self.dismiss(PresetChoice(preset_id, text))

    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed)
    async def _pressed(self, event: Button.Pressed) -> None:
        actions = {"use": self.action_use, "new": self.action_new, "cancel": self.action_cancel}
        if event.button.id == "save":
            await self.action_save()
        elif event.button.id in actions:
            actions[event.button.id]()
