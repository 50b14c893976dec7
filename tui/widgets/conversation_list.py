"""The sidebar: a search field and the conversations, newest first."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import Input, Label, ListItem, ListView

from ember.app.history.store import Conversation
from ember.tui.messages import ConversationSelected
from ember.tui.text import visible


class ConversationItem(ListItem):
    """One row of the list."""

    def __init__(self, conversation: Conversation) -> None:
        super().__init__(Label(Content(visible(conversation.title))))
        self.conversation = conversation


class ConversationList(Vertical):
    """Search + list; posts ConversationSelected when a row is chosen."""

    def compose(self) -> ComposeResult:
        yield Input(placeholder="Search chats", id="chat-search")
        yield ListView(id="chat-list")

    @property
    def search_text(self) -> str:
        return self.query_one("#chat-search", Input).value

    async def show(self, conversations: list[Conversation], current_id: int | None) -> None:
        """Fill the list and highlight the current conversation."""
        view = self.query_one(ListView)
        await view.clear()
        await view.extend([ConversationItem(c) for c in conversations])
        ids = [c.id for c in conversations]
        if ids:
            view.index = ids.index(current_id) if current_id in ids else 0

    def highlighted_id(self) -> int | None:
        """The id under the list cursor."""
        item = self.query_one(ListView).highlighted_child
        return item.conversation.id if isinstance(item, ConversationItem) else None

    @on(ListView.Selected)
    def _selected(self, event: ListView.Selected) -> None:
        event.stop()
        if isinstance(event.item, ConversationItem):
            self.post_message(ConversationSelected(event.item.conversation.id))
