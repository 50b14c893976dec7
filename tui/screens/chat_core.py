"""The chat screen's core: layout, showing a conversation, sending and streaming replies."""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Footer, Input, Static

from ember.app.history.store import Conversation, Message
from ember.engine.api import GenerationRequest
from ember.errors import EmberError
from ember.tui.chat_config import chat_messages, chat_value, engine_options, sampling_params
from ember.tui.generation import Generation
from ember.tui.messages import (
    BackendLoaded,
    ConversationSelected,
    MessageAction,
    PromptSubmitted,
    ReplyDelta,
    ReplyFailed,
    ReplyFinished,
)
from ember.tui.widgets.conversation_list import ConversationList
from ember.tui.widgets.message_view import MessageView
from ember.tui.widgets.prompt_input import PromptInput
from ember.tui.widgets.status_bar import StatusBar

if TYPE_CHECKING:
    from ember.tui.app import EmberApp

_FINAL_STATUS = {
    "stop": "complete",
    "length": "complete",
    "loop": "complete",
    "abort": "stopped",
    "error": "error",
}
FLUSH_INTERVAL_S = 0.5  # how often a streaming reply's text is written to the history


class ChatCore(Screen[None]):
    """State, layout and the streaming loop; ChatScreen adds the key actions."""

    conversation: Conversation | None
    generation: Generation | None
    editing: Message | None

    def __init__(self) -> None:
        super().__init__(id="chat")
        self.conversation = None
        self.generation = None
        self.editing = None
        self._last_flush = 0.0
        self._stream_started = 0.0
        self._stream_tokens = 0

    @property
    def ember(self) -> EmberApp:
        return self.app  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        with Horizontal(id="chat-body"):
            yield ConversationList(id="sidebar")
            with Vertical(id="chat-main"):
                yield MessageView(id="messages")
                yield Static("", id="edit-banner")
                yield PromptInput(id="prompt")
        yield StatusBar(id="status")
        yield Footer()

    async def on_mount(self) -> None:
        self.query_one("#edit-banner").display = False
        chats = self.ember.history.list_conversations()
        await self.open_conversation(chats[0].id if chats else None)
        self.query_one(PromptInput).focus()

    # showing

    async def open_conversation(self, conversation_id: int | None) -> None:
        """Show a conversation (None: a blank new chat, created on the first send)."""
        history = self.ember.history
        self.conversation = history.conversation(conversation_id) if conversation_id else None
        await self.refresh_messages()
        await self.refresh_list()
        self.update_status()

    async def ensure_conversation(self) -> Conversation:
        """The shown conversation, created (with the defaults) if this is a blank new chat."""
        if self.conversation is None:
            self.conversation = self.ember.new_conversation()
            await self.refresh_list()
        return self.conversation

    async def refresh_messages(self) -> None:
        """Re-read the shown branch from the history."""
        view = self.query_one(MessageView)
        if self.conversation is None:
            await view.show([])
            return
        history = self.ember.history
        shown: list[tuple[Message, tuple[int, int]]] = []
        for message in history.path(self.conversation.id):
            siblings = [s.id for s in history.siblings(message.id)]
            shown.append((message, (siblings.index(message.id) + 1, len(siblings))))
        await view.show(shown)

    async def refresh_list(self) -> None:
        """Re-read the conversation list (filtered by the search field)."""
        sidebar = self.query_one(ConversationList)
        chats = self.ember.history.list_conversations(sidebar.search_text)
        await sidebar.show(chats, self.conversation.id if self.conversation else None)

    def update_status(self, state: str | None = None) -> None:
        """Refresh the status bar (the model shown is the chat's)."""
        bar = self.query_one(StatusBar)
        info = self.ember.host.info
        if info is not None:
            bar.info.apply_info(info)
        if self.conversation is not None:
            bar.info.model = chat_value(self.conversation.settings, self.ember.settings, "model")
        elif info is None:
            bar.info.model = self.ember.settings.model
        if state is not None:
            bar.info.state = state
        bar.show()

    # sending and streaming

    @on(PromptSubmitted)
    async def _prompt_submitted(self, event: PromptSubmitted) -> None:
        if self.generation is not None:
            self.notify(
                "A reply is still streaming: press Esc to stop it first.", severity="warning"
            )
            return
        history = self.ember.history
        if self.conversation is None:
            self.conversation = self.ember.new_conversation(title=_title(event.text))
        if self.editing is not None:
            parent_id = self.editing.parent_id
        else:
            parent_id = self.conversation.leaf_id
            if parent_id is None and history.path(self.conversation.id):
                parent_id = history.path(self.conversation.id)[-1].id
        user = history.add_message(self.conversation.id, "user", event.text, parent_id)
        self.query_one(PromptInput).clear()
        self.set_editing(None)
        await self.start_reply(user.id)
        await self.refresh_list()

    async def start_reply(self, parent_id: int) -> None:
        """Store an empty streaming reply under parent_id, show the branch, start the worker."""
        assert self.conversation is not None
        history, settings = self.ember.history, self.ember.settings
        conv = history.conversation(self.conversation.id)
        try:
            sampling = sampling_params(conv.settings, settings)
            options = engine_options(chat_value(conv.settings, settings, "model"), settings)
        except EmberError as exc:
            self.notify(f"cannot generate: {exc}", severity="error", markup=False)
            history.set_leaf(conv.id, parent_id)
            await self.refresh_messages()
            return
        reply = history.add_message(conv.id, "assistant", "", parent_id, status="streaming")
        self.conversation = history.conversation(conv.id)
        path = history.path(conv.id)
        request = GenerationRequest(
            messages=chat_messages(conv.system_prompt, path[:-1]), sampling=sampling
        )
        await self.refresh_messages()
        self.query_one(MessageView).anchor()
        self.generation = Generation(reply.id)
        self._last_flush = self._stream_started = time.monotonic()
        self._stream_tokens = 0
        self.update_status("generating" if self.ember.host.info else "loading")
        generation, host, post = self.generation, self.ember.host, self.post_message
        self.run_worker(
            lambda: generation.run(host, options, request, post),
            thread=True,
            group="generation",
            exit_on_error=False,
        )

    @on(BackendLoaded)
    def _backend_loaded(self, event: BackendLoaded) -> None:
        self.query_one(StatusBar).info.apply_info(event.info)
        self.update_status("generating" if self.generation else "idle")

    @on(ReplyDelta)
    async def _reply_delta(self, event: ReplyDelta) -> None:
        generation = self.generation
        if generation is None or event.message_id != generation.message_id:
            return
        generation.text += event.text
        self._stream_tokens += event.num_tokens
        box = self.query_one(MessageView).box(event.message_id)
        if box is not None:
            await box.append(event.text)
        now = time.monotonic()
        if now - self._last_flush >= FLUSH_INTERVAL_S:
            self._last_flush = now
            self.ember.history.update_message(event.message_id, generation.text, durable=False)
            bar = self.query_one(StatusBar)
            bar.info.tok_s = self._stream_tokens / max(now - self._stream_started, 1e-6)
            bar.info.state = "generating"
            bar.show()

    @on(ReplyFinished)
    async def _reply_finished(self, event: ReplyFinished) -> None:
        finished = event.finished
        status = _FINAL_STATUS[finished.reason]
        await self._end_reply(event.message_id, status, finished.text)
        self.ember.history.update_message(
            event.message_id, finished.text, status, dataclasses.asdict(finished.stats)
        )
        self.query_one(StatusBar).info.apply_stats(finished.stats)
        self.update_status("idle")
        if finished.reason == "error":
            self.notify(f"generation failed: {finished.error}", severity="error", markup=False)
        elif finished.reason == "loop":
            self.notify(
                "The reply was stopped: it kept repeating itself.", severity="warning", markup=False
            )

    @on(ReplyFailed)
    async def _reply_failed(self, event: ReplyFailed) -> None:
        text = self.generation.text if self.generation else ""
        await self._end_reply(event.message_id, "error", text)
        self.ember.history.update_message(event.message_id, text, "error")
        self.update_status("idle")
        self.notify(event.reason, title="Error", severity="error", markup=False, timeout=10)

    async def _end_reply(self, message_id: int, status: str, text: str) -> None:
        if self.generation is not None and self.generation.message_id == message_id:
            self.generation = None
        box = self.query_one(MessageView).box(message_id)
        if box is not None:
            await box.finish(status, text)
            box.refresh(layout=True)

    def shutdown(self) -> None:
        """On quit: stop a streaming reply and store what it has, marked stopped."""
        generation = self.generation
        if generation is not None:
            generation.stop()
            self.ember.history.update_message(generation.message_id, generation.text, "stopped")
            self.generation = None

    # small events

    @on(ConversationSelected)
    async def _conversation_selected(self, event: ConversationSelected) -> None:
        if self.generation is not None:
            self.notify(
                "Stop the streaming reply (Esc) before switching chats.", severity="warning"
            )
            return
        self.set_editing(None)
        await self.open_conversation(event.conversation_id)
        self.query_one(PromptInput).focus()

    @on(Input.Changed, "#chat-search")
    async def _search_changed(self) -> None:
        await self.refresh_list()

    @on(Input.Submitted, "#chat-search")
    def _search_submitted(self) -> None:
        self.query_one("#chat-list").focus()

    @on(MessageAction)
    async def _message_action(self, event: MessageAction) -> None:
        await self.message_action(event.message_id, event.action)

    async def message_action(self, message_id: int, action: str) -> None:
        """Overridden by ChatScreen."""

    def set_editing(self, message: Message | None) -> None:
        """Overridden by ChatScreen."""


def _title(text: str) -> str:
    first = text.strip().splitlines()[0] if text.strip() else "New chat"
    return first[:40] + ("…" if len(first) > 40 else "")
