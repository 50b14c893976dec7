"""The chat screen: conversation list, message view, prompt and status bar over a ChatSession.

It turns keys and typed messages into ChatSession calls and shows what the history then holds;
replies stream from a thread worker as ReplyDelta / ReplyFinished / ReplyFailed messages.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Footer, Input, Static

from ember.app.history.store import Message
from ember.errors import EmberError
from ember.tui.chat.generation import Generation
from ember.tui.chat.session import ChatBusy, ChatSession
from ember.tui.messages import (
    AttachFailed,
    BackendLoaded,
    BranchStepped,
    ConversationSelected,
    CopyRequested,
    EditRequested,
    FileAttached,
    PromptSubmitted,
    ReplyDelta,
    ReplyFailed,
    ReplyFinished,
    ReplyStarted,
    ToolDecided,
    ToolRan,
    WaitProgress,
)
from ember.tui.notices import notify_error
from ember.tui.screens.chat import attachments, chats, per_chat, replies, tool_calls, transfer
from ember.tui.screens.chat.attachments import file_command, show_attachments, start_attach
from ember.tui.widgets.conversation_list import ConversationList
from ember.tui.widgets.message_view import MessageView
from ember.tui.widgets.prompt_input import PromptInput
from ember.tui.widgets.status_bar import StatusBar

if TYPE_CHECKING:
    from ember.tui.app import EmberApp

EDIT_BANNER = "Editing an earlier message: Enter sends it as a new branch, Esc cancels"


class ChatScreen(Screen[None]):
    """The chat: shows the session's conversation and streams its replies. Attachments, tool
    calls, export/import and per-chat choices are functions in this folder that it calls."""

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

    @property
    def ember(self) -> EmberApp:
        return self.app  # type: ignore[return-value]

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

    def refused(self, exc: EmberError) -> None:
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
            self.refused(exc)
            return False
        self._show_editing(None)
        show_attachments(self)
        await self.refresh_messages()
        await self.refresh_list()
        replies.show_last_stats(self)
        self.update_status()
        return True

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
            self.refused(exc)
            return
        if message is not None or message_id is None:  # a reply's box cannot be edited
            self._show_editing(message)

    # sending and streaming

    @on(PromptSubmitted)
    async def _prompt_submitted(self, event: PromptSubmitted) -> None:
        command = file_command(event.text)
        if command is not None:  # `/file PATH` (and the message to send with it, if any)
            start_attach(self, *command)
            return
        try:
            reply: Generation | None = self.session.send(event.text)
        except ChatBusy as exc:
            self.refused(exc)
            return
        except EmberError as exc:  # the user message is stored; its reply could not start
            self.refused(exc)
            reply = None
        self.query_one(PromptInput).clear()
        self._show_editing(None)
        show_attachments(self)
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
        replies.backend_loaded(self, event)

    @on(ReplyDelta)
    async def _reply_delta(self, event: ReplyDelta) -> None:
        await replies.reply_delta(self, event)

    @on(ReplyStarted)
    def _reply_started(self, event: ReplyStarted) -> None:
        replies.reply_started(self, event)

    @on(ReplyFinished)
    async def _reply_finished(self, event: ReplyFinished) -> None:
        await replies.reply_finished(self, event)

    @on(ReplyFailed)
    async def _reply_failed(self, event: ReplyFailed) -> None:
        await replies.reply_failed(self, event)

    async def end_reply(self, message_id: int, status: str, text: str) -> None:
        """Mark a reply's box finished (done, stopped or error) with its final text."""
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

    @work(group="dialog")
    async def action_rename(self) -> None:
        await chats.rename_chat(self)

    @work(group="dialog")
    async def action_delete_chat(self) -> None:
        await chats.delete_chat(self)

    # messages

    async def action_stop(self) -> None:
        """Esc: stop the streaming reply (or a turn waiting for tool decisions), else leave
        edit mode."""
        waiting = self.session.reply if self.session.reply and self.session.reply.waiting else None
        if self.session.stop():
            if waiting is not None:
                await tool_calls.end_waiting_turn(self, waiting.message_id)
            return
        if self.session.editing is not None:
            self._edit(None)
            self.query_one(PromptInput).clear()

    async def action_regenerate(self) -> None:
        try:
            reply = self.session.regenerate()
        except EmberError as exc:
            self.refused(exc)
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
        """Ctrl+Up / Ctrl+Down: the previous or next message; past the last, the prompt."""
        if not self.query_one(MessageView).focus_step(step, self.focused):
            self.query_one(PromptInput).focus()

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
            self.refused(exc)
            return
        if shown_id is None:
            return
        await self.refresh_messages()
        box = self.query_one(MessageView).box(shown_id)
        if box is not None:
            box.focus()

    # attachments, tool calls, export and import, per-chat choices (functions in this folder)

    @work(group="dialog")
    async def action_attach(self) -> None:
        """F4: ask for a file's path and attach it to the next message."""
        await attachments.ask_and_attach(self)

    def action_detach(self) -> None:
        attachments.detach(self)

    @on(FileAttached)
    def _file_attached(self, event: FileAttached) -> None:
        attachments.file_attached(self, event)

    @on(AttachFailed)
    def _attach_failed(self, event: AttachFailed) -> None:
        notify_error(self, "Not attached", event.reason)

    @on(ToolDecided)
    def _tool_decided(self, event: ToolDecided) -> None:
        tool_calls.tool_decided(self, event)

    @on(ToolRan)
    def _tool_ran(self, event: ToolRan) -> None:
        tool_calls.tool_ran(self, event)

    @work(group="dialog")
    async def action_export(self, fmt: str = "md") -> None:
        """Export this chat: Markdown (the shown branch) or JSON (every branch)."""
        await transfer.export_chat(self, fmt)

    @work(group="dialog")
    async def action_import(self) -> None:
        await transfer.import_chats(self)

    def action_toggle_thinking(self) -> None:
        """F5: this chat's thinking switch, where the model's template has one."""
        per_chat.toggle_thinking(self)

    @work(group="dialog")
    async def action_switch_model(self) -> None:
        await per_chat.switch_model(self)

    def action_pull_model(self) -> None:
        per_chat.pull_model(self)

    @work(group="dialog")
    async def action_presets(self) -> None:
        await per_chat.pick_preset(self)

    async def use_preset(self, preset_id: int) -> None:
        """Make a preset this chat's system prompt (the palette's `System prompt: NAME`)."""
        await per_chat.use_preset(self, preset_id)

    @work(group="dialog")
    async def action_chat_settings(self) -> None:
        await per_chat.edit_settings(self)
