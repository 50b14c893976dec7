"""The chat screen: conversation list, message view, prompt and status bar over a ChatSession.

It turns keys and typed messages into ChatSession calls and shows what the history then holds;
replies stream from a thread worker as ReplyDelta / ReplyFinished / ReplyFailed messages.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.widgets import Footer, Input, ListView, Static

from ember.app.history.store import Message
from ember.engine.api import Stats
from ember.errors import EmberError
from ember.tui.chat_session import ChatBusy, ChatSession, empty_reply_note
from ember.tui.generation import Generation
from ember.tui.messages import (
    BackendLoaded,
    BranchStepped,
    ConversationSelected,
    CopyRequested,
    EditRequested,
    PromptSubmitted,
    ReplyDelta,
    ReplyFailed,
    ReplyFinished,
    ReplyStarted,
    WaitProgress,
)
from ember.tui.notices import notify_error
from ember.tui.screens.chat_extras import ChatExtras, file_command
from ember.tui.screens.chat_settings import ChatSettingsDialog
from ember.tui.screens.dialogs import ConfirmDialog, TextDialog
from ember.tui.screens.presets import PresetChoice, PresetDialog
from ember.tui.widgets.conversation_list import ConversationList
from ember.tui.widgets.message_view import MessageBox, MessageView
from ember.tui.widgets.prompt_input import PromptInput
from ember.tui.widgets.status_bar import StatusBar

if TYPE_CHECKING:
    pass

EDIT_BANNER = "Editing an earlier message: Enter sends it as a new branch, Esc cancels"


class ChatScreen(ChatExtras):
    """The chat: shows the session's conversation and streams its replies."""

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
        Binding("f4", "attach", "Attach file"),
        Binding("f5", "toggle_thinking", "Thinking"),
        Binding("ctrl+up", "focus_message(-1)", "Prev message", show=False),
        Binding("ctrl+down", "focus_message(1)", "Next message", show=False),
    ]

    def __init__(self, session: ChatSession) -> None:
        super().__init__(id="chat")
        self.session = session

    def compose(self) -> ComposeResult:
        with Horizontal(id="chat-body"):
            yield ConversationList(id="sidebar")
            with Vertical(id="chat-main"):
                yield MessageView(id="messages")
                yield Static("", id="edit-banner")
                yield Static("", id="attach-banner")
                yield PromptInput(id="prompt")
        yield StatusBar(id="status")
        yield Footer()

    async def on_mount(self) -> None:
        self.query_one("#edit-banner").display = False
        self.query_one("#attach-banner").display = False
        chats = self.session.history.list_conversations()
        await self.open_conversation(chats[0].id if chats else None)
        self.query_one(PromptInput).focus()

    def on_unmount(self) -> None:
        """However the app ends (quit, an error, a test's end), stop a streaming reply and keep
        what it has; otherwise its worker thread would hold the exit until the reply ends."""
        self.session.shutdown()

    def _refused(self, exc: EmberError) -> None:
        """Say why an action did not happen (one line; the chat is kept)."""
        if isinstance(exc, ChatBusy):
            self.notify(str(exc), severity="warning")
        else:
            self.notify(str(exc), severity="error", markup=False)

    # showing

    async def open_conversation(self, conversation_id: int | None) -> bool:
        """Show a conversation (None: a blank new chat, created on the first send); False when
        refused (a reply is streaming)."""
        try:
            self.session.open(conversation_id)
        except EmberError as exc:
            self._refused(exc)
            return False
        self._show_editing(None)
        self.show_attachments()
        await self.refresh_messages()
        await self.refresh_list()
        self._show_last_stats()
        self.update_status()
        return True

    def _show_last_stats(self) -> None:
        """The status bar shows this chat's last reply (nothing for a new chat)."""
        info = self.query_one(StatusBar).info
        info.clear_reply()
        last = self.session.last("assistant")
        if last is not None and last.stats:
            known = {f.name for f in dataclasses.fields(Stats)}
            try:
                info.apply_stats(Stats(**{k: v for k, v in last.stats.items() if k in known}))
            except TypeError:
                info.clear_reply()  # stats written by another version: show none

    async def refresh_messages(self) -> None:
        """Re-read the shown branch from the history."""
        shown = self.session.shown()
        await self.query_one(MessageView).show([(s.message, s.branch) for s in shown])

    async def refresh_list(self) -> None:
        """Re-read the conversation list (filtered by the search field)."""
        sidebar = self.query_one(ConversationList)
        chats = self.session.history.list_conversations(sidebar.search_text)
        conv = self.session.conversation
        await sidebar.show(chats, conv.id if conv else None)

    def update_status(self, state: str | None = None) -> None:
        """Refresh the status bar (the model shown is the chat's)."""
        bar = self.query_one(StatusBar)
        info = self.session.host.info
        if info is not None:
            bar.info.apply_info(info)
        if self.session.conversation is not None or info is None:
            bar.info.model = self.session.model
        if state is not None:
            bar.info.state = state
        bar.show()

    def _show_editing(self, message: Message | None) -> None:
        """Edit mode: the prompt holds an earlier message; sending makes a new branch."""
        banner = self.query_one("#edit-banner", Static)
        banner.display = message is not None
        if message is not None:
            banner.update(Content(EDIT_BANNER))
            prompt = self.query_one(PromptInput)
            prompt.load_text(message.content)
            prompt.move_cursor(prompt.document.end)
            prompt.focus()

    def _edit(self, message_id: int | None) -> None:
        try:
            message = self.session.edit(message_id)
        except EmberError as exc:
            self._refused(exc)
            return
        if message is not None or message_id is None:  # a reply's box cannot be edited
            self._show_editing(message)

    # sending and streaming

    @on(PromptSubmitted)
    async def _prompt_submitted(self, event: PromptSubmitted) -> None:
        command = file_command(event.text)
        if command is not None:  # `/file PATH` (and the message to send with it, if any)
            self.start_attach(*command)
            return
        try:
            reply: Generation | None = self.session.send(event.text)
        except ChatBusy as exc:
            self._refused(exc)
            return
        except EmberError as exc:  # the user message is stored; its reply could not start
            self._refused(exc)
            reply = None
        self.query_one(PromptInput).clear()
        self._show_editing(None)
        self.show_attachments()
        await self._show_reply(reply)
        await self.refresh_list()

    async def _show_reply(self, reply: Generation | None) -> None:
        """Show the branch with the new (empty) reply and start its thread worker."""
        await self.refresh_messages()
        if reply is None:
            return
        self.query_one(MessageView).follow()
        self.run_reply(reply)

    def run_reply(self, reply: Generation) -> None:
        """Start a reply's thread worker (a new one, or a turn going on after tool results)."""
        self.query_one(StatusBar).info.start_reply(None)
        self.update_status("generating" if self.session.host.info else "loading")
        session, post = self.session, self.post_message
        self.run_worker(
            lambda: session.run_reply(reply, post),
            thread=True,
            group="generation",
            exit_on_error=False,
        )

    @on(WaitProgress)
    def _wait_progress(self, event: WaitProgress) -> None:
        if event.done < event.total:  # the last one: BackendLoaded or the reply takes over
            self.update_status(event.label())
        elif self.session.busy:
            self.update_status("generating")

    @on(BackendLoaded)
    def _backend_loaded(self, event: BackendLoaded) -> None:
        self.query_one(StatusBar).info.apply_info(event.info)
        self.update_status("generating" if self.session.busy else "idle")
        if event.info.context_note:  # --ctx auto: the context it chose, and why
            self.notify(event.info.context_note, markup=False, timeout=10)

    @on(ReplyDelta)
    async def _reply_delta(self, event: ReplyDelta) -> None:
        if not self.session.take_delta(event):
            return
        box = self.query_one(MessageView).box(event.message_id)
        if box is not None:
            await box.append(event.text, event.reasoning)
        reply = self.session.reply
        if reply is not None:
            bar = self.query_one(StatusBar)
            bar.info.add_reply_tokens(reply.num_tokens, reply.tok_s)
            bar.info.state = "generating"
            bar.show()

    @on(ReplyStarted)
    def _reply_started(self, event: ReplyStarted) -> None:
        reply = self.session.reply
        if reply is None or reply.message_id != event.message_id:
            return
        bar = self.query_one(StatusBar)
        bar.info.start_reply(event.prompt_tokens)
        bar.info.add_reply_tokens(reply.num_tokens, reply.tok_s)
        self.update_status("generating")

    @on(ReplyFinished)
    async def _reply_finished(self, event: ReplyFinished) -> None:
        finished = event.finished
        status = self.session.finish(event)
        self.query_one(StatusBar).info.apply_stats(finished.stats)
        if status is None:  # tool calls: the turn waits for the user's decisions
            await self.show_tool_calls(event.message_id)
            return
        message = self.session.history.message(event.message_id)
        await self._end_reply(event.message_id, status, message.content)
        self.update_status("idle")
        if status == "empty":  # never a finished answer: say what happened, offer Ctrl+R
            thought = any(p.kind == "reasoning" for p in message.parts)
            note = empty_reply_note(finished, thought)
            self.notify(note, title="No answer", severity="warning", markup=False, timeout=15)
        if finished.reason == "error":
            notify_error(self, "Generation failed", finished.error)

    @on(ReplyFailed)
    async def _reply_failed(self, event: ReplyFailed) -> None:
        text = self.session.fail(event)
        await self._end_reply(event.message_id, "error", text)
        self.update_status("idle")
        notify_error(self, "The reply could not run", event.reason, timeout=10)

    async def _end_reply(self, message_id: int, status: str, text: str) -> None:
        box = self.query_one(MessageView).box(message_id)
        if box is not None:
            await box.finish(status, text)
            box.refresh(layout=True)

    # chats

    @on(ConversationSelected)
    async def _conversation_selected(self, event: ConversationSelected) -> None:
        if await self.open_conversation(event.conversation_id):
            self.query_one(PromptInput).focus()

    @on(Input.Changed, "#chat-search")
    async def _search_changed(self) -> None:
        await self.refresh_list()

    @on(Input.Submitted, "#chat-search")
    def _search_submitted(self) -> None:
        self.query_one("#chat-list").focus()

    async def action_new_chat(self) -> None:
        if await self.open_conversation(None):
            self.query_one(PromptInput).focus()

    def action_search(self) -> None:
        self.query_one("#chat-search", Input).focus()

    def _target_chat_id(self) -> int | None:
        if self.query_one("#chat-list", ListView).has_focus:
            return self.query_one(ConversationList).highlighted_id()
        conv = self.session.conversation
        return conv.id if conv else None

    @work(group="dialog")
    async def action_rename(self) -> None:
        chat_id = self._target_chat_id()
        if chat_id is None:
            return
        history = self.session.history
        title = await self.app.push_screen_wait(
            TextDialog("Rename chat", history.conversation(chat_id).title)
        )
        if title and title.strip():
            history.update_conversation(chat_id, title=title.strip())
            await self.refresh_list()

    @work(group="dialog")
    async def action_delete_chat(self) -> None:
        chat_id = self._target_chat_id()
        if chat_id is None:
            return
        if self.session.busy:
            self._refused(ChatBusy())
            return
        title = self.session.history.conversation(chat_id).title
        if not await self.app.push_screen_wait(ConfirmDialog(f"Delete the chat {title!r}?")):
            return
        try:
            self.session.delete(chat_id)
        except EmberError as exc:
            self._refused(exc)
            return
        if self.session.conversation is None:
            await self.open_conversation(None)
        else:
            await self.refresh_list()

    # messages

    async def action_stop(self) -> None:
        """Esc: stop the streaming reply (or a turn waiting for tool decisions), else leave
        edit mode."""
        waiting = self.session.reply if self.session.reply and self.session.reply.waiting else None
        if self.session.stop():
            if waiting is not None:
                await self.end_waiting_turn(waiting.message_id)
            return
        if self.session.editing is not None:
            self._edit(None)
            self.query_one(PromptInput).clear()

    async def action_regenerate(self) -> None:
        try:
            reply = self.session.regenerate()
        except EmberError as exc:
            self._refused(exc)
            await self.refresh_messages()
            return
        if reply is not None:
            await self._show_reply(reply)

    def action_edit_last(self) -> None:
        last = self.session.last("user")
        if last is not None:
            self._edit(last.id)

    def action_copy_last(self) -> None:
        last = self.session.last("assistant")
        if last is not None:
            self.ember.copy_text(last.content)

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
        if isinstance(self.focused, MessageBox):
            self.focused.scroll_visible()

    @on(EditRequested)
    def _edit_requested(self, event: EditRequested) -> None:
        self._edit(event.message_id)

    @on(CopyRequested)
    def _copy_requested(self, event: CopyRequested) -> None:
        self.ember.copy_text(self.session.history.message(event.message_id).content)

    @on(BranchStepped)
    async def _branch_stepped(self, event: BranchStepped) -> None:
        try:
            shown_id = self.session.switch_branch(event.message_id, event.step)
        except EmberError as exc:
            self._refused(exc)
            return
        if shown_id is None:
            return
        await self.refresh_messages()
        box = self.query_one(MessageView).box(shown_id)
        if box is not None:
            box.focus()

    # per-chat settings

    @work(group="dialog")
    async def action_presets(self) -> None:
        conv = self.session.ensure_conversation()
        choice: PresetChoice | None = await self.app.push_screen_wait(
            PresetDialog(self.session.history, conv.preset_id, conv.system_prompt)
        )
        if choice is not None:
            self.session.update(preset_id=choice.preset_id, system_prompt=choice.system_prompt)
            await self.refresh_list()  # the chat may be new
            label = "cleared" if not choice.system_prompt.strip() else "set for this chat"
            self.notify(f"System prompt {label}")

    async def use_preset(self, preset_id: int) -> None:
        """Make a preset this chat's system prompt (the palette's `System prompt: NAME`)."""
        preset = next((p for p in self.session.history.list_presets() if p.id == preset_id), None)
        if preset is None:
            return
        self.session.update(preset_id=preset.id, system_prompt=preset.content)
        await self.refresh_list()
        self.notify(f"System prompt {preset.name!r} set for this chat", markup=False)

    @work(group="dialog")
    async def action_chat_settings(self) -> None:
        conv = self.session.ensure_conversation()
        result: dict[str, Any] | None = await self.app.push_screen_wait(
            ChatSettingsDialog(conv.settings, self.session.settings, self.ember.model_names())
        )
        if result is None:
            return
        self.session.update(settings=result)
        await self.refresh_list()  # the chat may be new
        self.update_status()
        self.ember.preload(self.session.model)
