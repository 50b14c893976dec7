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

from ember.app.config import CHAT_FORMATS, DEVICES, RUNNERS, Settings, save_settings
from ember.app.rules import KV_CACHE_TYPES
from ember.errors import EmberError
from ember.tui.widgets.form import Form, FormError, FormField

if TYPE_CHECKING:
    from ember.tui.app import EmberApp

_LABELS = {
    "model": "Default model",
    "runner": "Runner",
    "device": "Device",
    "threads": "Threads (0 = all cores)",
    "ctx": "Context (tokens, 0 = auto)",
    "kv_cache": "KV cache (f16/q8/q4)",
    "sink": "Sink tokens",
    "window": "Window (-1 auto, 0 off)",
    "draft": "Draft (auto/none/lookup/self/model)",
    "draft_tokens": "Draft tokens",
    "prefix_cache": "Prefix cache",
    "system_prompt": "System prompt",
    "temperature": "Temperature",
    "top_k": "Top-k",
    "top_p": "Top-p",
    "min_p": "Min-p",
    "repeat_penalty": "Repeat penalty",
    "max_tokens": "Max reply tokens",
    "chat_format": "Chat format (auto/template/scaffold)",
    "dry_multiplier": "DRY multiplier (0 = off)",
    "dry_base": "DRY base",
    "dry_allowed_length": "DRY allowed length",
    "dry_penalty_last_n": "DRY range (-1 = all)",
    "dry_sequence_breakers": "DRY sequence breakers (JSON)",
    "loop_min_tokens": "Loop stop after (tokens, 0 = off)",
}
_KINDS = {"int": int, "float": float, "bool": bool, "str": str}


def settings_fields(settings: Settings, models: list[str]) -> list[FormField]:
    """One form field per setting, in the dataclass's order."""
    choices = {
        "runner": RUNNERS,
        "device": DEVICES,
        "model": tuple(models),
        "chat_format": CHAT_FORMATS,
        "kv_cache": KV_CACHE_TYPES,
    }
    out = []
    for f in dataclasses.fields(Settings):
        if f.name == "extra":
            continue
        out.append(
            FormField(
                f.name,
                _LABELS.get(f.name, f.name),
                getattr(settings, f.name),
                _KINDS[str(f.type)],
                tuple(choices.get(f.name, ())),
            )
        )
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
