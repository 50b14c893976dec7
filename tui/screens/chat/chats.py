"""The chat list's actions: rename or delete the highlighted chat (or the open one when the list
does not have focus). Functions of the ChatScreen they act on."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.widgets import ListView

from ember.errors import EmberError
from ember.tui.chat.session import ChatBusy
from ember.tui.screens.dialogs import ConfirmDialog, TextDialog
from ember.tui.widgets.conversation_list import ConversationList

if TYPE_CHECKING:
    from ember.tui.screens.chat.screen import ChatScreen


def target_chat_id(screen: ChatScreen) -> int | None:
    """The highlighted chat when the list has focus, else the open one."""
    if screen.query_one("#chat-list", ListView).has_focus:
        return screen.query_one(ConversationList).highlighted_id()
    conv = screen.session.conversation
    return conv.id if conv else None


async def rename_chat(screen: ChatScreen) -> None:
    chat_id = target_chat_id(screen)
    if chat_id is None:
        return
    history = screen.session.history
    title = await screen.app.push_screen_wait(
        TextDialog("Rename chat", history.conversation(chat_id).title)
    )
    if title and title.strip():
        history.update_conversation(chat_id, title=title.strip())
        await screen.refresh_list()


async def delete_chat(screen: ChatScreen) -> None:
    """Delete a chat after a y/n confirmation (not while a reply streams)."""
    chat_id = target_chat_id(screen)
    if chat_id is None:
        return
    if screen.session.busy:
        screen.refused(ChatBusy())
        return
    title = screen.session.history.conversation(chat_id).title
    if not await screen.app.push_screen_wait(ConfirmDialog(f"Delete the chat {title!r}?")):
        return
    try:
        screen.session.delete(chat_id)
    except EmberError as exc:
        screen.refused(exc)
        return
    if screen.session.conversation is None:
        await screen.open_conversation(None)
    else:
        await screen.refresh_list()
