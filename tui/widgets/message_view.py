"""The conversation: one focusable box per message; replies stream in as Markdown."""

from __future__ import annotations

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.widget import Widget
from textual.widgets import Markdown, Static
from textual.widgets.markdown import MarkdownStream

from ember.app.history.parts import MessagePart
from ember.app.history.store import Message
from ember.tui.messages import BranchStepped, CopyRequested, EditRequested
from ember.tui.text import visible
from ember.tui.widgets.reply_views import ThinkingView, ToolCallView

_STATUS_NOTE = {
    "stopped": "stopped",
    "interrupted": "interrupted",
    "error": "error",
    "empty": "empty reply: no answer was written (Ctrl+R tries again)",
    "streaming": "…",
}


class MessageBox(Vertical, can_focus=True):
    """One message: a header (who, status, branch i/n) and its text."""

    BINDINGS = [
        Binding("e", "edit", "Edit"),
        Binding("c,y", "copy", "Copy"),
        Binding("t", "toggle_thinking", "Show thinking"),
        Binding("left,[", "branch(-1)", "Prev branch"),
        Binding("right,]", "branch(1)", "Next branch"),
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
        if self.message.role != "assistant":
            yield Static(Content(visible(self.text)), classes="message-body")
            return
        parts = self.message.parts or (MessagePart("text", self.text),)
        calls: dict[str, ToolCallView] = {}
        for part in parts:
            if part.kind == "reasoning":
                yield ThinkingView(part.text)
            elif part.kind == "text":
                yield Markdown(visible(part.text), classes="message-body")
            elif part.kind == "tool_call":
                calls[part.call_id] = ToolCallView(self.message.id, part)
                yield calls[part.call_id]
            elif part.kind == "tool_result" and part.call_id in calls:
                calls[part.call_id].result = part
        if not any(p.kind == "text" for p in parts):
            yield Markdown("", classes="message-body")  # where streamed text goes

    def _header(self) -> Content:
        who = "You" if self.message.role == "user" else "Ember"
        parts = [who]
        if self.status in _STATUS_NOTE:
            parts.append(_STATUS_NOTE[self.status])
        index, count = self.branch
        if count > 1:
            parts.append(f"‹ {index}/{count} ›")
        files = [p.name for p in self.message.parts if p.kind == "file"]
        if files:
            parts.append("attached: " + ", ".join(visible(name) for name in files))
        return Content(" · ".join(parts))

    def action_edit(self) -> None:
        self.post_message(EditRequested(self.message.id))

    def action_copy(self) -> None:
        self.post_message(CopyRequested(self.message.id))

    def action_branch(self, step: int) -> None:
        self.post_message(BranchStepped(self.message.id, step))

    def action_toggle_thinking(self) -> None:
        for view in self.query(ThinkingView):
            view.collapsed = not view.collapsed

    def _last_part_view(self) -> Widget | None:
        children = [c for c in self.children if not c.has_class("message-header")]
        return children[-1] if children else None

    async def append(self, text: str, reasoning: str = "") -> None:
        """Stream more of the reply: reasoning into a thinking view, text into the Markdown
        after the latest part (a new one after tool calls)."""
        if reasoning:
            last = self._last_part_view()
            empty = isinstance(last, Markdown) and not last.source
            if empty:  # text has not started: the thinking goes above it
                views = [c for c in self.children if not c.has_class("message-header")]
                last = views[-2] if len(views) > 1 else None
            if isinstance(last, ThinkingView):
                last.append(reasoning)
            else:
                before = self._last_part_view() if empty else None
                await self.mount(ThinkingView(reasoning, streaming=True), before=before)
        if not text:
            return
        self.text += text
        last = self._last_part_view()
        if not isinstance(last, Markdown):
            await self._end_stream()
            last = Markdown("", classes="message-body")
            await self.mount(last)
        if self._stream is None:
            self._stream = Markdown.get_stream(last)
        await self._stream.write(visible(text))

    async def _end_stream(self) -> None:
        if self._stream is not None:
            await self._stream.stop()
            self._stream = None
        for view in self.query(ThinkingView):
            view.done()

    async def add_calls(self, calls: list[MessagePart], servers: dict[str, str]) -> None:
        """Show tool calls the reply made (after what it wrote)."""
        await self._end_stream()
        for call in calls:
            await self.mount(ToolCallView(self.message.id, call, servers.get(call.name, "")))

    def call_view(self, call_id: str) -> ToolCallView | None:
        return next((v for v in self.query(ToolCallView) if v.call.call_id == call_id), None)

    async def finish(self, status: str, text: str | None = None) -> None:
        """End the stream and show the final status."""
        await self._end_stream()
        self.status = status
        plain = not self.query(ToolCallView) and not self.query(ThinkingView)
        if plain and text is not None and text != self.text:
            self.text = text
            await self.query_one(Markdown).update(visible(text))
        self.query_one(".message-header", Static).update(self._header())


class MessageView(VerticalScroll):
    """Holds the message boxes; follows a streaming reply unless the user scrolls up.

    `following` is Ember's own flag and the only thing that turns following on or off: any scroll
    the user makes (keys, wheel, scrollbar, focusing a box) stops it at once, and only the user
    scrolling down to the end (or `follow()`) starts it again. While following, Textual's anchor
    keeps the content's bottom at the view's bottom (so a short chat sits just above the prompt,
    like in a messenger); it is cleared on every user scroll, so nothing Textual queued can pull
    the view back down after a PageUp.
    """

    following: bool = True

    async def show(self, messages: list[tuple[Message, tuple[int, int]]]) -> None:
        """Replace the shown messages (each with its branch position)."""
        await self.remove_children()
        await self.mount_all([MessageBox(m, branch) for m, branch in messages])
        self.scroll_to(y=0, animate=False, immediate=True)  # drop the old chat's scroll offset
        # follow once the new boxes are laid out: before that, the end is not known
        self.call_after_refresh(self.follow)

    def follow(self) -> None:
        """Keep the end in view as content grows (until the user scrolls)."""
        self.following = True
        self.anchor()

    def release_anchor(self) -> None:
        # Textual calls this first in every scroll its keys, wheel and scrollbar make (the
        # scroll_* methods' release_anchor=True), before the position moves
        super().release_anchor()
        self.following = False
        self.anchor(False)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        # only a move down that reaches the end resumes following: an upward scroll never
        # does, even when the end it compares with is not yet updated for new content
        if not self.following and new_value > old_value and new_value >= self.max_scroll_y:
            self.follow()

    # at the end, scrolling further down moves nothing (so no watch fires): follow from there

    def _at_end(self) -> bool:
        return self.scroll_y >= self.max_scroll_y

    def action_scroll_end(self) -> None:
        """End: jump to the end and follow (an animated scroll stops short of a growing end)."""
        self.follow()

    def action_scroll_down(self) -> None:
        if self._at_end():
            self.follow()
        else:
            super().action_scroll_down()

    def action_page_down(self) -> None:
        if self._at_end():
            self.follow()
        else:
            super().action_page_down()

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        if self._at_end() and not (event.ctrl or event.shift):
            event.prevent_default()  # Textual's own handler would release the anchor
            event.stop()
            self.follow()

    def box(self, message_id: int) -> MessageBox | None:
        """The box showing message_id, if any."""
        for box in self.query(MessageBox):
            if box.message.id == message_id:
                return box
        return None

    def boxes(self) -> list[MessageBox]:
        """All boxes, top to bottom."""
        return list(self.query(MessageBox))

    def focus_step(self, step: int, focused: Widget | None) -> bool:
        """Focus the box `step` boxes from `focused` (from the end when no box has focus and
        step < 0); False when that would go past the last box (the prompt is next)."""
        boxes = self.boxes()
        if not boxes:
            return True
        if isinstance(focused, MessageBox) and focused in boxes:
            index = boxes.index(focused) + step
            if index >= len(boxes):
                return False
            boxes[max(index, 0)].focus()
            boxes[max(index, 0)].scroll_visible()
        elif step < 0:
            boxes[-1].focus()
            boxes[-1].scroll_visible()
        return True
