"""The chat screen and its key actions: chats (new, rename, delete, search), messages (stop,
regenerate, edit as a branch, switch branch, copy), presets and per-chat settings."""

from __future__ import annotations

from typing import Any

from textual import work
from textual.binding import Binding
from textual.content import Content
from textual.widgets import Input, ListView, Static

from ember.app.history.store import Message
from ember.tui.chat_config import chat_value
from ember.tui.screens.chat_core import ChatCore
from ember.tui.screens.chat_settings import ChatSettingsDialog
from ember.tui.screens.dialogs import ConfirmDialog, TextDialog
from ember.tui.screens.presets import PresetChoice, PresetDialog
from ember.tui.widgets.conversation_list import ConversationList
from ember.tui.widgets.message_view import MessageBox, MessageView
from ember.tui.widgets.prompt_input import PromptInput


class ChatScreen(ChatCore):
    """Conversation list, message view, prompt input and status bar, with their keys."""

    BINDINGS = [
        Binding("escape", "stop", "Stop"),
        Binding("ctrl+n", "new_chat", "New chat"),
        Binding("ctrl+f", "search", "Search"),
        Binding("f2", "rename", "Rename"),
        Binding("f8", "delete_chat", "Delete chat"),
        Binding("ctrl+r", "regenerate", "Regenerate"),
        Binding("ctrl+b", "edit_last", "Edit (branch)"),
        Binding("ctrl+l", "copy_last", "Copy reply"),
        Binding("ctrl+t", "presets", "System prompt"),
        Binding("ctrl+g", "chat_settings", "Chat settings"),
        Binding("ctrl+up", "focus_message(-1)", "Prev message", show=False),
        Binding("ctrl+down", "focus_message(1)", "Next message", show=False),
    ]

    def _busy(self) -> bool:
        if self.generation is not None:
            self.notify("A reply is streaming: press Esc to stop it first.", severity="warning")
            return True
        return False

    def action_stop(self) -> None:
        """Esc: stop the streaming reply, else leave edit mode."""
        if self.generation is not None:
            self.generation.stop()
        elif self.editing is not None:
            self.set_editing(None)
            self.query_one(PromptInput).clear()

    async def action_new_chat(self) -> None:
        if self._busy():
            return
        self.set_editing(None)
        await self.open_conversation(None)
        self.query_one(PromptInput).focus()

    def action_search(self) -> None:
        self.query_one("#chat-search", Input).focus()

    def _target_chat_id(self) -> int | None:
        if self.query_one("#chat-list", ListView).has_focus:
            return self.query_one(ConversationList).highlighted_id()
        return self.conversation.id if self.conversation else None

    @work(group="dialog")
    async def action_rename(self) -> None:
        chat_id = self._target_chat_id()
        if chat_id is None:
            return
        title = await self.app.push_screen_wait(
            TextDialog("Rename chat", self.ember.history.conversation(chat_id).title)
        )
        if title and title.strip():
            self.ember.history.update_conversation(chat_id, title=title.strip())
            await self.refresh_list()

    @work(group="dialog")
    async def action_delete_chat(self) -> None:
        chat_id = self._target_chat_id()
        if chat_id is None or self._busy():
            return
        title = self.ember.history.conversation(chat_id).title
        if not await self.app.push_screen_wait(ConfirmDialog(f"Delete the chat {title!r}?")):
            return
        self.ember.history.delete_conversation(chat_id)
        if self.conversation and self.conversation.id == chat_id:
            await self.open_conversation(None)
        else:
            await self.refresh_list()

    async def action_regenerate(self) -> None:
        """A new reply to the last user message, kept beside the old one as a branch."""
        if self.conversation is None or self._busy():
            return
        path = self.ember.history.path(self.conversation.id)
        if not path:
            return
        last = path[-1]
        parent = last.parent_id if last.role == "assistant" else last.id
        if parent is None:
            return
        await self.start_reply(parent)

    def action_edit_last(self) -> None:
        if self.conversation is None:
            return
        users = [m for m in self.ember.history.path(self.conversation.id) if m.role == "user"]
        if users:
            self.set_editing(users[-1])

    def set_editing(self, message: Message | None) -> None:
        """Edit mode: the prompt holds an earlier message; sending makes a new branch."""
        self.editing = message
        banner = self.query_one("#edit-banner", Static)
        banner.display = message is not None
        if message is not None:
            banner.update(
                Content("Editing an earlier message: Enter sends it as a new branch, Esc cancels")
            )
            prompt = self.query_one(PromptInput)
            prompt.load_text(message.content)
            prompt.move_cursor(prompt.document.end)
            prompt.focus()

    def action_copy_last(self) -> None:
        if self.conversation is None:
            return
        replies = [
            m for m in self.ember.history.path(self.conversation.id) if m.role == "assistant"
        ]
        if replies:
            self.ember.copy_text(replies[-1].content)

    def action_focus_message(self, step: int) -> None:
        boxes = self.query_one(MessageView).boxes()
        if not boxes:
            return
        focused = self.focused
        if isinstance(focused, MessageBox) and focused in boxes:
            index = boxes.index(focused) + step
            if index >= len(boxes):
                self.query_one(PromptInput).focus()
                return
            boxes[max(index, 0)].focus()
        elif step < 0:
            boxes[-1].focus()
        boxes_focused = self.focused
        if isinstance(boxes_focused, MessageBox):
            boxes_focused.scroll_visible()

    async def message_action(self, message_id: int, action: str) -> None:
        """edit | copy | prev_branch | next_branch on one message."""
        history = self.ember.history
        message = history.message(message_id)
        if action == "copy":
            self.ember.copy_text(message.content)
        elif action == "edit" and message.role == "user" and not self._busy():
            self.set_editing(message)
        elif action in ("prev_branch", "next_branch") and not self._busy():
            siblings = history.siblings(message_id)
            index = [s.id for s in siblings].index(message_id) + (
                1 if action == "next_branch" else -1
            )
            if 0 <= index < len(siblings):
                history.select_branch(siblings[index].id)
                await self.refresh_messages()
                box = self.query_one(MessageView).box(siblings[index].id)
                if box is not None:
                    box.focus()

    @work(group="dialog")
    async def action_presets(self) -> None:
        conv = await self.ensure_conversation()
        choice: PresetChoice | None = await self.app.push_screen_wait(
            PresetDialog(self.ember.history, conv.preset_id, conv.system_prompt)
        )
        if choice is not None:
            self.conversation = self.ember.history.update_conversation(
                conv.id, preset_id=choice.preset_id, system_prompt=choice.system_prompt
            )
            label = "cleared" if not choice.system_prompt.strip() else "set for this chat"
            self.notify(f"System prompt {label}")

    @work(group="dialog")
    async def action_chat_settings(self) -> None:
        conv = await self.ensure_conversation()
        models = self.ember.model_names()
        result: dict[str, Any] | None = await self.app.push_screen_wait(
            ChatSettingsDialog(conv.settings, self.ember.settings, models)
        )
        if result is None:
            return
        self.conversation = self.ember.history.update_conversation(conv.id, settings=result)
        self.update_status()
        model = chat_value(result, self.ember.settings, "model")
        self.ember.preload(model)
