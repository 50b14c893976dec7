"""Per-chat model and sampling settings."""

from __future__ import annotations

from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label

from ember.app.config import Settings
from ember.app.parameters import SAMPLING_NAMES, parameter
from ember.errors import EmberError
from ember.tui.chat.config import chat_value, sampling_params
from ember.tui.widgets.form import Form, FormError, FormField


class ChatSettingsDialog(ModalScreen[dict[str, Any] | None]):
    """Edit one chat's model and sampling; returns the new settings dict, or None on cancel."""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel"),
        Binding("ctrl+s", "save", "Save", priority=True),
    ]

    def __init__(self, chat: dict[str, Any], defaults: Settings, models: list[str]) -> None:
        super().__init__(classes="dialog-screen")
        self.chat = chat
        self.defaults = defaults
        self.models = models

    def compose(self) -> ComposeResult:
        model = chat_value(self.chat, self.defaults, "model")
        fields = [FormField("model", "Model", model, str, tuple(self.models))]
        fields += [
            FormField(
                k, parameter(k).title, chat_value(self.chat, self.defaults, k), parameter(k).kind
            )
            for k in SAMPLING_NAMES
        ]
        fields.append(FormField("seed", "seed", self.chat.get("seed"), int, optional=True))
        with Vertical(classes="dialog wide"):
            yield Label("Chat settings (this chat only)")
            yield Form(fields, id="chat-form")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Save (ctrl+s)", id="save", variant="primary")
                yield Button("Cancel (esc)", id="cancel")

    def action_save(self) -> None:
        try:
            values = self.query_one(Form).values()
            sampling_params(values, self.defaults)  # validates ranges
        except (FormError, EmberError) as exc:
            self.notify(str(exc), severity="error", markup=False)
            return
        self.dismiss({**self.chat, **values})

    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed, "#save")
    def _save(self) -> None:
        self.action_save()

    @on(Button.Pressed, "#cancel")
    def _cancel(self) -> None:
        self.action_cancel()
