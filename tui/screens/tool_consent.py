"""ToolConsentDialog: the one question before a tool call runs.

It takes the keyboard (a modal screen with nothing focusable in it, so no key reaches the prompt
or a button), and it cannot be answered by typing that was meant for the prompt: every key and
click in the first DEBOUNCE_S after it appears is dropped, and no plain letter answers at all.
Ctrl+Y runs the call once, Ctrl+T runs it and allow-lists the tool on this machine (Ember's
settings file: app/mcp/consent.py), Esc denies it. Everything the model and the tool's server
wrote (name, arguments, description) is shown as plain text, cut to a bounded length.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import ClassVar

from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static

from ember.tui.text import visible

DEBOUNCE_S = 0.8  # keys typed this soon after the dialog appears were meant for the prompt
MAX_DESCRIPTION_CHARS = 600
now: Callable[[], float] = time.monotonic  # the dialogs' clock (tests move their own)
Answer = str  # "run" | "always" | "deny"


def clipped(text: str, limit: int) -> str:
    """text shown as plain text (control characters pictured or escaped), cut to at most
    `limit` characters of what is shown, then "…"."""
    shown = visible(text)
    return shown if len(shown) <= limit else shown[:limit] + "…"


class ToolConsentDialog(ModalScreen[Answer]):
    """Asks whether one tool call may run; dismissed with "run", "always" or "deny"."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+y", "answer('run')", "Run once"),
        Binding("ctrl+t", "answer('always')", "Always allow this tool"),
        Binding("escape", "answer('deny')", "Deny"),
    ]
    AUTO_FOCUS = None  # nothing in it takes focus: keys go to the screen's own handler

    def __init__(
        self,
        summary: str,
        server: str = "",
        description: str = "",
        clock: Callable[[], float] | None = None,
    ) -> None:
        super().__init__(classes="dialog-screen")
        self.summary = summary
        self.server = server
        self.description = description
        self._clock = clock or now
        self.shown_at = self._clock()
        self.dropped_keys = 0  # keys that came before the dialog was ready to be answered

    @property
    def armed(self) -> bool:
        """Answers count: the debounce time has passed since the dialog appeared."""
        return self._clock() - self.shown_at >= DEBOUNCE_S

    def compose(self) -> ComposeResult:
        where = f" from the MCP server {visible(self.server)}" if self.server else ""
        with Vertical(classes="dialog wide tool-consent"):
            yield Label(Content(f"The model asks to run a tool{where}:"))
            yield Static(Content(clipped(self.summary, 2 * MAX_DESCRIPTION_CHARS)), id="call")
            if self.description:
                size = len(self.description)
                cut = f" ({size:,} characters; the first {MAX_DESCRIPTION_CHARS} shown)"
                yield Label(
                    Content(
                        "The server describes it"
                        + (cut if size > MAX_DESCRIPTION_CHARS else "")
                        + ":"
                    )
                )
                with VerticalScroll(id="about"):  # bounded: the answer keys stay in sight
                    yield Static(Content(clipped(self.description, MAX_DESCRIPTION_CHARS)))
            yield Static(Content(self._hint()), id="consent-hint")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Run once (Ctrl+Y)", id="run", variant="warning")
                yield Button("Always allow (Ctrl+T)", id="always")
                yield Button("Deny (Esc)", id="deny", variant="primary")

    def on_mount(self) -> None:
        for widget in self.query("*"):
            widget.can_focus = False  # Enter typed for the prompt must not press a button
        self.set_focus(None)
        self._arming = self.set_interval(0.1, self._show_hint)

    def _hint(self) -> str:
        if not self.armed:
            return "(a moment: keys typed now are ignored)"
        return "Ctrl+Y: run once · Ctrl+T: always allow this tool on this machine · Esc: deny"

    def _show_hint(self) -> None:
        """Until armed, check again each tick; then show the keys that answer."""
        if self.armed and self.is_mounted:
            self.query_one("#consent-hint", Static).update(Content(self._hint()))
            self._arming.stop()

    def on_key(self, event: events.Key) -> None:
        """Before the dialog is armed every key is dropped (bindings included); after, only
        the bound keys answer and the rest do nothing."""
        if not self.armed:
            self.dropped_keys += 1
            event.stop()
            event.prevent_default()

    def action_answer(self, answer: Answer) -> None:
        if self.armed:
            self.dismiss(answer)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if self.armed and event.button.id in ("run", "always", "deny"):
            self.dismiss(event.button.id)
