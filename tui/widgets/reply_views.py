"""Views of a reply's parts beyond its text: thinking (collapsed, dimmed, expandable) and tool
calls (what the model asks to run, the user's decision, the result)."""

from __future__ import annotations

import json

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import Collapsible, Static

from ember.app.history.parts import MessagePart
from ember.tui.text import visible

MAX_SHOWN_ARGUMENTS = 400  # characters of a call's arguments in its one-line summary


class ThinkingView(Collapsible):
    """A reply's reasoning: one dim line until expanded (Enter on it, or t on its message)."""

    def __init__(self, text: str = "", streaming: bool = False) -> None:
        self.text = text
        self.streaming = streaming
        self._thinking_body = Static(Content(visible(text)), classes="thinking-text")
        super().__init__(
            self._thinking_body, title=self._heading(), collapsed=True, classes="thinking"
        )

    def _heading(self) -> str:
        words = len(self.text.split())
        return "Thinking…" if self.streaming else f"Thinking ({words} words)"

    def append(self, text: str) -> None:
        self.text += text
        self._thinking_body.update(Content(visible(self.text)))
        self.title = self._heading()

    def done(self) -> None:
        self.streaming = False
        self.title = self._heading()


def call_summary(part: MessagePart) -> str:
    """`name(arguments)` on one line (long arguments cut)."""
    try:
        arguments = json.dumps(json.loads(part.arguments or "{}"), ensure_ascii=False)
    except ValueError:
        arguments = part.arguments
    if len(arguments) > MAX_SHOWN_ARGUMENTS:
        arguments = arguments[:MAX_SHOWN_ARGUMENTS] + "…"
    return f"{part.name}({arguments})"


_RESULT_NOTE = {"ok": "ran", "error": "failed", "denied": "denied"}
ASK = "waiting for your answer (Ctrl+Y: run once · Ctrl+T: always allow · Esc: deny)"


class ToolCallView(Vertical, can_focus=True):
    """One call: its summary, then whether it waits for the user's answer (asked in a
    ToolConsentDialog, never by keys on this view) or how it went, and the result."""

    def __init__(self, message_id: int, call: MessagePart, server: str = "") -> None:
        super().__init__(classes="tool-call")
        self.message_id = message_id
        self.call = call
        self.server = server
        self.result: MessagePart | None = None
        self.asking = False

    def compose(self) -> ComposeResult:
        where = f" · {visible(self.server)}" if self.server else ""
        yield Static(Content(f"Tool call{where}: {visible(call_summary(self.call))}"))
        yield Static("", classes="tool-state")
        yield Collapsible(
            Static("", classes="tool-result"), title="Result", collapsed=True, classes="result"
        )

    def on_mount(self) -> None:
        self._show()

    def ask(self) -> None:
        """Waiting for the user: show the question (the caller focuses this view)."""
        self.asking = True
        self._show()

    def set_result(self, result: MessagePart) -> None:
        self.result, self.asking = result, False
        self._show()

    def _show(self) -> None:
        if not self.is_mounted:
            return
        state = self.query_one(".tool-state", Static)
        box = self.query_one(".result", Collapsible)
        if self.result is not None:
            note = _RESULT_NOTE.get(self.result.status, self.result.status)
            state.update(Content(f"{note}: {len(self.result.text):,} characters back"))
            self.query_one(".tool-result", Static).update(Content(visible(self.result.text)))
            box.display = True
        else:
            state.update(Content(ASK if self.asking else "waiting"))
            box.display = False
        self.set_class(self.asking, "asking")
