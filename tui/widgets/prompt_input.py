"""The multi-line prompt: Enter sends, Shift+Enter or Ctrl+J inserts a newline, Up/Down recall."""

from __future__ import annotations

from textual import events
from textual.widgets import TextArea

from ember.tui.messages import PromptSubmitted


class PromptInput(TextArea):
    """A TextArea that posts PromptSubmitted on Enter and keeps an input history."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, soft_wrap=True, tab_behavior="focus", show_line_numbers=False)
        self.input_history: list[str] = []
        self._history_index: int | None = None  # None = editing a new entry
        self._draft = ""

    async def _on_key(self, event: events.Key) -> None:
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            self._submit()
            return
        if event.key in ("shift+enter", "ctrl+j"):
            event.stop()
            event.prevent_default()
            self.insert("\n")
            return
        await super()._on_key(event)

    def _submit(self) -> None:
        text = self.text
        if not text.strip():
            return
        if not self.input_history or self.input_history[-1] != text:
            self.input_history.append(text)
        self._history_index = None
        self._draft = ""
        self.post_message(PromptSubmitted(text))

    def action_cursor_up(self, select: bool = False) -> None:
        if select or not self.cursor_at_first_line or not self.input_history:
            super().action_cursor_up(select)
            return
        if self._history_index is None:
            self._draft = self.text
            self._history_index = len(self.input_history)
        if self._history_index > 0:
            self._history_index -= 1
            self._show(self.input_history[self._history_index])

    def action_cursor_down(self, select: bool = False) -> None:
        if select or not self.cursor_at_last_line or self._history_index is None:
            super().action_cursor_down(select)
            return
        self._history_index += 1
        if self._history_index >= len(self.input_history):
            self._history_index = None
            self._show(self._draft)
        else:
            self._show(self.input_history[self._history_index])

    def _show(self, text: str) -> None:
        self.load_text(text)
        self.move_cursor(self.document.end)
