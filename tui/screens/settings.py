"""The settings screen: defaults for new chats, saved to the config file."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Button, Footer, Label

from ember.app.config import Settings, save_settings
from ember.app.parameters import parameter
from ember.errors import EmberError
from ember.tui.widgets.form import Form, FormError, FormField

if TYPE_CHECKING:
    from ember.tui.app import EmberApp

def settings_fields(settings: Settings, models: list[str]) -> list[FormField]:
    """One form field per setting, in the dataclass's order: its label, type and choices are
    its row in the parameter table (app/parameters), like its flag's and the config file's."""
    out = []
    for f in dataclasses.fields(Settings):
        if f.name == "extra":
            continue
        row = parameter(f.name)
        choices = tuple(models) if f.name == "model" else row.choices
        out.append(FormField(f.name, row.title, getattr(settings, f.name), row.kind, choices))
    return out


class SettingsScreen(Screen[None]):
    """Edit and save the defaults; Esc goes back without saving."""

    BINDINGS = [
        Binding("ctrl+s", "save", "Save", priority=True),
        Binding("escape", "back", "Back"),
    ]

    @property
    def ember(self) -> EmberApp:
        return self.app  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        yield Label(
            "Settings: defaults for new chats (saved to the config file)", id="settings-title"
        )
        yield Form(
            settings_fields(self.ember.settings, self.ember.model_names()), id="settings-form"
        )
        with Horizontal(classes="dialog-buttons"):
            yield Button("Save (ctrl+s)", id="save", variant="primary")
            yield Button("Back (esc)", id="back")
        yield Footer()

    def action_save(self) -> None:
        try:
            values = self.query_one(Form).values()
            settings = Settings(**values, extra=self.ember.settings.extra)
            path = save_settings(settings, self.ember.paths)
        except (FormError, EmberError, OSError) as exc:
            self.notify(str(exc), title="Not saved", severity="error", markup=False)
            return
        self.ember.settings = settings
        self.notify(f"Saved to {path}; new chats use these settings.", markup=False)
        self.dismiss()

    def action_back(self) -> None:
        self.dismiss()

    @on(Button.Pressed, "#save")
    def _save(self) -> None:
        self.action_save()

    @on(Button.Pressed, "#back")
    def _back(self) -> None:
        self.action_back()
