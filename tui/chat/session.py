"""ChatSession: the open chat's history, request and reply lifecycle, with no widgets.

The chat screen calls down into it (send, stop, regenerate, edit, switch branch) and shows what
the history then holds. A reply runs in a thread worker (`run_reply`) that loads the model if
needed and posts typed messages up to the screen; the screen hands them back (`take_delta`,
`finish`, `fail`) and the session stores them. Nothing here needs a running Textual app.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ember.app.config import Settings
from ember.app.history.parts import MessagePart
from ember.app.history.store import Conversation, History, Message, MessageStatus
from ember.engine.api import Backend, EngineOptions, Finished, GenerationRequest
from ember.errors import EmberError
from ember.paths import Paths, get_paths
from ember.tui.attachments import Attachment, attach
from ember.tui.backend_host import BackendHost
from ember.tui.chat.config import (
    chat_messages,
    chat_value,
    engine_options,
    new_chat_settings,
    sampling_params,
)
from ember.tui.chat.generation import Clock, Generation, Post
from ember.tui.chat.reply_parts import call_part, result_part, unanswered
from ember.tui.chat.tool_turns import DENIED, ToolTurns
from ember.tui.messages import (
    BackendLoaded,
    ReplyDelta,
    ReplyFailed,
    ReplyFinished,
    WaitProgress,
)
from ember.tui.toolbox import Toolbox

FLUSH_INTERVAL_S = 0.5  # how often a streaming reply's text is written to the history
MAX_TOOL_ROUNDS = 8  # tool calls a reply may make in a row before it must answer in text
FINAL_STATUS: dict[str, MessageStatus] = {
    "stop": "complete",
    "length": "complete",
    "loop": "complete",
    "abort": "stopped",
    "error": "error",
}


def empty_reply_note(finished: Finished, thought: bool) -> str:
    """What happened when a reply ended without any text, and what to do (Ctrl+R)."""
    tokens = finished.stats.generated_tokens
    if thought:
        what = f"the model only thought ({tokens} tokens) and wrote no answer"
    elif tokens <= 1:
        what = "the model ended its reply at once, before writing anything"
    else:
        what = f"the model wrote only blank space ({tokens} tokens)"
    return f"Empty reply: {what}. Press Ctrl+R to try again (a retry samples anew)."


class ChatBusy(EmberError):
    """Refused: a reply is streaming (the one notice for every action that must wait)."""

    def __init__(self) -> None:
        super().__init__("A reply is streaming: press Esc to stop it first.")


@dataclass(frozen=True)
class ShownMessage:
    """A message on the shown branch and its place among its alternatives (1-based, count)."""

    message: Message
    branch: tuple[int, int] = (1, 1)


class ChatSession(ToolTurns):
    """One open conversation (or a blank new chat, created on the first send) and its reply."""

    def __init__(
        self,
        history: History,
        host: BackendHost,
        settings: Settings,
        clock: Clock = time.monotonic,
        toolbox: Toolbox | None = None,
        paths: Paths | None = None,
    ) -> None:
        self.history = history
        self.paths = paths or get_paths()  # where "always allow" writes the settings file
        self.toolbox = toolbox  # MCP tools offered to the model (None: none configured)
        self.host = host
        self.settings = settings  # the defaults for new chats; the settings screen replaces it
        self.conversation: Conversation | None = None
        self.reply: Generation | None = None  # the reply streaming now
        self.editing: Message | None = None  # an earlier user message being edited as a branch
        self.attachments: list[Attachment] = []  # files that go with the next message
        self._clock = clock
        self._flushed_s = 0.0

    @property
    def busy(self) -> bool:
        return self.reply is not None

    def _refuse_if_busy(self) -> None:
        if self.reply is not None:
            raise ChatBusy()

    # conversations

    def new_conversation(self, title: str = "New chat") -> Conversation:
        """A stored conversation with the current defaults (model, sampling, system prompt)."""
        return self.history.create_conversation(
            title, self.settings.system_prompt, new_chat_settings(self.settings)
        )

    def open(self, conversation_id: int | None) -> None:
        """Show a conversation (None: a blank new chat)."""
        self._refuse_if_busy()
        self.editing = None
        self.attachments = []
        history = self.history
        self.conversation = history.conversation(conversation_id) if conversation_id else None

    def ensure_conversation(self) -> Conversation:
        """The open conversation, created with the defaults if this is a blank new chat."""
        if self.conversation is None:
            self.conversation = self.new_conversation()
        return self.conversation

    def update(self, **changes: Any) -> Conversation:
        """Change the open conversation's title, system prompt, preset or settings."""
        conv = self.ensure_conversation()
        self.conversation = self.history.update_conversation(conv.id, **changes)
        return self.conversation

    def use_model(self, model: str) -> Conversation:
        """Make this chat use model from its next reply on."""
        conv = self.ensure_conversation()
        return self.update(settings={**conv.settings, "model": model})

    def delete(self, conversation_id: int) -> None:
        """Delete a conversation; deleting the open one leaves a blank new chat."""
        self._refuse_if_busy()
        self.history.delete_conversation(conversation_id)
        if self.conversation is not None and self.conversation.id == conversation_id:
            self.open(None)

    @property
    def model(self) -> str:
        """The model the open chat uses (the default for a blank new chat)."""
        if self.conversation is None:
            return self.settings.model
        return str(chat_value(self.conversation.settings, self.settings, "model"))

    def path(self) -> list[Message]:
        """The shown branch, root first."""
        return self.history.path(self.conversation.id) if self.conversation else []

    def shown(self) -> list[ShownMessage]:
        """The shown branch with each message's place among its alternatives."""
        shown = []
        for message in self.path():
            siblings = [s.id for s in self.history.siblings(message.id)]
            shown.append(ShownMessage(message, (siblings.index(message.id) + 1, len(siblings))))
        return shown

    def last(self, role: str) -> Message | None:
        """The shown branch's last message of role ("user" or "assistant")."""
        return next((m for m in reversed(self.path()) if m.role == role), None)

    # messages

    def edit(self, message_id: int | None) -> Message | None:
        """Start editing an earlier user message (the next send branches from its parent), or
        stop editing with None. Returns the message being edited."""
        if message_id is None:
            self.editing = None
            return None
        self._refuse_if_busy()
        message = self.history.message(message_id)
        if message.role != "user":
            return None  # only the user's own messages are edited
        self.editing = message
        return message

    def switch_branch(self, message_id: int, step: int) -> int | None:
        """Show the previous (-1) or next (+1) alternative of a message; returns its id, or
        None when there is none that way."""
        self._refuse_if_busy()
        siblings = [s.id for s in self.history.siblings(message_id)]
        index = siblings.index(message_id) + step
        if not 0 <= index < len(siblings):
            return None
        self.history.select_branch(siblings[index])
        self._reread()
        return siblings[index]

    # turns

    def send(self, text: str) -> Generation:
        """Store a user message (creating the chat, or branching when editing), start its reply.

        Raises ChatBusy (nothing stored) or EmberError when the reply cannot start (the user
        message is kept)."""
        self._refuse_if_busy()
        history = self.history
        if self.conversation is None:
            self.conversation = self.new_conversation(title=_title(text))
        if self.editing is not None:
            parent_id = self.editing.parent_id
        else:  # the shown branch's end, read again: a branch switch moved it
            parent_id = history.conversation(self.conversation.id).leaf_id
        files = tuple(MessagePart("file", a.text, name=a.name) for a in self.attachments)
        user = history.add_message(self.conversation.id, "user", text, parent_id, parts=files)
        self.attachments = []
        self.editing = None
        self.conversation = history.conversation(self.conversation.id)
        return self.start_reply(user.id)

    def regenerate(self) -> Generation | None:
        """A new reply to the last user message, kept beside the old one as a branch."""
        self._refuse_if_busy()
        path = self.path()
        if not path:
            return None
        last = path[-1]
        parent = last.parent_id if last.role == "assistant" else last.id
        return self.start_reply(parent) if parent is not None else None

    def start_reply(self, parent_id: int) -> Generation:
        """Store an empty streaming reply under parent_id and prepare its request; the caller
        runs `run_reply` in a thread worker. EmberError (the branch shown ends at parent_id)
        when the chat's settings cannot make a request."""
        self._refuse_if_busy()
        conv = self.history.conversation(self.ensure_conversation().id)
        try:
            sampling = sampling_params(conv.settings, self.settings)
            model = chat_value(conv.settings, self.settings, "model")
            options = engine_options(model, self.settings)
        except EmberError as exc:
            self.history.set_leaf(conv.id, parent_id)
            self.conversation = self.history.conversation(conv.id)
            raise EmberError(f"cannot generate: {exc}") from exc
        reply = self.history.add_message(conv.id, "assistant", "", parent_id, status="streaming")
        self.conversation = self.history.conversation(conv.id)
        request = GenerationRequest(
            messages=chat_messages(conv.system_prompt, self.path()[:-1]), sampling=sampling
        )
        self.reply = Generation(reply.id, request, options, self._clock, prepare=self._prepare)
        self._flushed_s = self._clock()
        return self.reply

    def load(self, options: EngineOptions, post: Post) -> Backend:
        """The one load path (replies and preloads): the backend for options; posts
        BackendLoaded when this call loaded it, and WaitProgress while weights load or a long
        prompt is prefilled (the status bar shows it). Blocking: call it from a thread worker."""

        def progress(stage: str, done: int, total: int) -> None:
            post(WaitProgress(stage, done, total))

        options = dataclasses.replace(options, progress=progress)
        return self.host.get(options, on_load=lambda backend: post(BackendLoaded(backend.info)))

    def chat_backend(self, post: Post) -> Backend:
        """The backend of the open chat's model, loading it if needed. Blocking: call it from
        a thread worker."""
        return self.load(engine_options(self.model, self.settings), post)

    def read_attachment(self, path: Path, post: Post) -> Attachment:
        """Read a text file and count it in the chat model's tokens (loading the model); the
        caller adds it to `attachments` (on the UI thread) to send it with the next message.
        AttachError (one line) when it cannot go. Blocking: call it from a thread worker."""
        return attach(path, self.chat_backend(post))

    def run_reply(self, reply: Generation, post: Post) -> None:
        """Thread worker body: load, submit, post the reply's messages. Never raises: a failure
        is posted as ReplyFailed with a one-line reason."""
        try:
            backend = self.load(reply.options, post)
            reply.follow(backend, post)
        except Exception as exc:  # noqa: BLE001 - any failure becomes a one-line notification
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            post(ReplyFailed(reply.message_id, reason))

    def take_delta(self, event: ReplyDelta) -> bool:
        """Add streamed text to the reply (stored every FLUSH_INTERVAL_S, without an fsync);
        False for a delta of a reply that is no longer streaming."""
        reply = self.reply
        if reply is None or event.message_id != reply.message_id:
            return False
        reply.add(event.text, event.num_tokens, event.reasoning)
        now = self._clock()
        if now - self._flushed_s >= FLUSH_INTERVAL_S:
            self._flushed_s = now
            self._store(reply, durable=False)
        return True

    def _store(self, reply: Generation, status: MessageStatus | None = None, **kw: Any) -> None:
        # a reply that is only text is stored as its content alone, as before parts existed
        parts = tuple(reply.parts) if any(p.kind != "text" for p in reply.parts) else ()
        self.history.update_message(reply.message_id, reply.text, status, parts=parts, **kw)

    def finish(self, event: ReplyFinished) -> MessageStatus | None:
        """Store a finished reply with its final status and stats; returns the status, or None
        when the reply made tool calls: the turn then waits for the user's decisions
        (`pending_calls`, `decide`) and goes on after their results (`take_tool_result`)."""
        finished, reply = event.finished, self.reply
        if reply is None or reply.message_id != event.message_id:
            return None
        status = FINAL_STATUS[finished.reason]
        stats = dataclasses.asdict(finished.stats)
        if event.calls and status == "complete" and reply.round < MAX_TOOL_ROUNDS:
            reply.parts += [call_part(call) for call in event.calls]
            reply.waiting = True
            self._store(reply, stats=stats)
            return None
        if status == "complete" and not reply.text.strip() and not event.calls:
            status = "empty"  # never shown as an answer: the screen says what happened
        self._end(event.message_id)
        self._store(reply, status, stats=stats)
        return status

    def fail(self, event: ReplyFailed) -> str:
        """Store a reply that could not run (with the text it had); returns that text."""
        reply = self.reply
        if reply is None or reply.message_id != event.message_id:
            self._end(event.message_id)
            self.history.update_message(event.message_id, "", "error")
            return ""
        self._end(event.message_id)
        self._store(reply, "error")
        return reply.text

    def stop(self) -> bool:
        """Esc: ask the streaming reply to stop (its ReplyFinished follows), or end a turn that
        waits for tool decisions (its calls denied); False if there is no reply."""
        reply = self.reply
        if reply is None:
            return False
        if reply.waiting:
            for call in unanswered(reply.parts):
                reply.parts.append(result_part(call, DENIED, "denied"))
            self._end(reply.message_id)
            self._store(reply, "stopped")
            return True
        reply.stop()
        return True

    def shutdown(self) -> None:
        """On quit: stop a streaming reply and store what it has, marked stopped."""
        reply = self.reply
        if reply is not None:
            reply.stop()
            self._store(reply, "stopped")
            self.reply = None

    def _end(self, message_id: int) -> None:
        if self.reply is not None and self.reply.message_id == message_id:
            self.reply = None
        self._reread()

    def _reread(self) -> None:
        """Take the open conversation's stored state (its leaf moves with every new message)."""
        if self.conversation is not None:
            self.conversation = self.history.conversation(self.conversation.id)


def _title(text: str) -> str:
    first = text.strip().splitlines()[0] if text.strip() else "New chat"
    return first[:40] + ("…" if len(first) > 40 else "")
