"""The conversation: one focusable box per message; replies stream in as Markdown."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.widgets import Markdown, Static
from textual.widgets.markdown import MarkdownStream

from ember.app.history.store import Message
from ember.tui.messages import MessageAction
from ember.tui.text import visible

_STATUS_NOTE = {
    "stopped": "stopped",
    "interrupted": "interrupted",
    "error": "error",
    "streaming": "…",
}


class MessageBox(Vertical, can_focus=True):
    """One message: a header (who, status, branch i/n) and its text."""

    BINDINGS = [
        Binding("e", "act('edit')", "Edit"),
        Binding("c,y", "act('copy')", "Copy"),
        Binding("left,[", "act('prev_branch')", "Prev branch"),
        Binding("right,]", "act('next_branch')", "Next branch"),
    ]

    def __init__(self, message: Message, branch: tuple[int, int] = (1, 1)) -> None:
        super().__init__(classes=f"message {message.role}")
        self.message = message
        self.text = message.content
        self.status = message.status
        self.branch = branch
        self._stream: MarkdownStream | None = None

    def compose(self) -> ComposeResult:
        yield Static(self._header(), classes="message-header")
        if self.message.role == "assistant":
            yield Markdown(visible(self.text), classes="message-body")
        else:
            yield Static(Content(visible(self.text)), classes="message-body")

    def _header(self) -> Content:
        who = "You" if self.message.role == "user" else "Ember"
        parts = [who]
        if self.status in _STATUS_NOTE:
            parts.append(_STATUS_NOTE[self.status])
        index, count = self.branch
        if count > 1:
            parts.append(f"‹ {index}/{count} ›")
        return Content(" · ".join(parts))

    def action_act(self, action: str) -> None:
        self.post_message(MessageAction(self.message.id, action))

    async def append(self, text: str) -> None:
        """Stream more reply text into the Markdown body."""
        self.text += text
        if self._stream is None:
            self._stream = Markdown.get_stream(self.query_one(Markdown))
        await self._stream.write(visible(text))

    async def finish(self, status: str, text: str | None = None) -> None:
        """End the stream and show the final status."""
        if self._stream is not None:
            await self._stream.stop()
            self._stream = None
        self.status = status
        if text is not None and text != self.text:
            self.text = text
            await self.query_one(Markdown).update(visible(text))
        self.query_one(".message-header", Static).update(self._header())


class MessageView(VerticalScroll):
    """Holds the message boxes; stays at the bottom while streaming unless the user scrolls up.

    While anchored, Textual keeps the content's bottom at the view's bottom, so a short chat sits
    just above the prompt like in a messenger.
    """

    async def show(self, messages: list[tuple[Message, tuple[int, int]]]) -> None:
        """Replace the shown messages (each with its branch position)."""
        await self.remove_children()
        await self.mount_all([MessageBox(m, branch) for m, branch in messages])
        self.scroll_to(y=0, animate=False, immediate=True)  # drop the old chat's scroll offset
        # anchor once the new boxes are laid out: before that, the end is not known
        self.call_after_refresh(self.anchor)

    async def add(self, message: Message, branch: tuple[int, int] = (1, 1)) -> MessageBox:
        """Append one message box and follow it."""
        box = MessageBox(message, branch)
        await self.mount(box)
        self.anchor()
        return box

    def box(self, message_id: int) -> MessageBox | None:
        """The box showing message_id, if any."""
        for box in self.query(MessageBox):
            if box.message.id == message_id:
                return box
        return None

    def boxes(self) -> list[MessageBox]:
        """All boxes, top to bottom."""
        return list(self.query(MessageBox))
