"""ToolTurns: the part of ChatSession that runs a reply's tool calls and its thinking switch.

A reply that ends with tool calls waits (`pending_calls`): each call runs only once the user
confirms it (`confirm`), or because the user allow-listed that tool on this machine (Ember's
settings file, app/mcp/consent.py; never a conversation's settings, which an import can fill),
or is denied (`deny`, its result says so). Each result is stored with the reply (`take_tool_result`); when every call
has one, the turn goes on: the model gets its calls and their results (tool turns) and writes
on, in the same reply.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from ember.app.mcp.consent import ALLOW_KEY, allow_tool, is_allowed
from ember.engine.api import Backend, GenerationRequest, ToolCall
from ember.errors import EmberError
from ember.tui.chat.config import chat_messages
from ember.tui.chat.generation import Clock, Generation, Post
from ember.tui.chat.reply_parts import assistant_turns, result_part, unanswered
from ember.tui.messages import ToolRan

if TYPE_CHECKING:
    from ember.app.config import Settings
    from ember.app.history.store import Conversation, History, Message
    from ember.paths import Paths
    from ember.tui.toolbox import Toolbox

DENIED = "The user did not allow this call."


class ToolTurns:
    """Mixed into ChatSession (which provides the attributes below)."""

    if TYPE_CHECKING:
        history: History
        settings: Settings
        paths: Paths
        conversation: Conversation | None
        reply: Generation | None
        toolbox: Toolbox | None

        def ensure_conversation(self) -> Conversation: ...

        def update(self, **changes: Any) -> Conversation: ...

        def path(self) -> list[Message]: ...

        _clock: Clock

        def _store(self, reply: Generation, status: str | None = None, **kw: Any) -> None: ...

    def _prepare(self, request: GenerationRequest, backend: Backend) -> GenerationRequest:
        """Worker: the request with this chat's tools and thinking switch, once the model is
        known (listing MCP tools connects their servers: blocking)."""
        settings = self.conversation.settings if self.conversation else {}
        changes: dict[str, Any] = {}
        thinking = settings.get("thinking")
        if isinstance(thinking, bool) and backend.info.features.get("thinking_switch"):
            changes["template_kwargs"] = {"enable_thinking": thinking}
        if self.toolbox is not None and settings.get("tools", True):
            changes["tools"] = self.toolbox.specs()
        return dataclasses.replace(request, **changes) if changes else request

    def set_thinking(self, on: bool) -> None:
        """This chat's thinking switch (the template's enable_thinking), from its next reply."""
        conv = self.ensure_conversation()
        self.update(settings={**conv.settings, "thinking": on})

    @property
    def thinking(self) -> bool | None:
        """This chat's switch (None: as the template has it by default)."""
        value = self.conversation.settings.get("thinking") if self.conversation else None
        return value if isinstance(value, bool) else None

    @property
    def pending_calls(self) -> list[ToolCall]:
        """The waiting reply's calls that have no result yet."""
        reply = self.reply
        return unanswered(reply.parts) if reply is not None and reply.waiting else []

    def always_allowed(self, call: ToolCall) -> bool:
        """The user allow-listed this tool (its server and name) in this machine's settings."""
        key = self.toolbox.key_of(call.name) if self.toolbox is not None else ""
        return is_allowed(self.settings.extra, key)

    def confirm(self, call_id: str, always: bool = False) -> ToolCall | None:
        """The user lets a pending call run (always: this tool, on this machine, from now on:
        written to the settings file; ConfigError if it cannot be); returns it (the caller runs
        `run_tool` in a worker), None if it is not pending."""
        call = next((c for c in self.pending_calls if c.id == call_id), None)
        if call is not None and always and self.toolbox is not None:
            key = self.toolbox.key_of(call.name)
            self.settings.extra[ALLOW_KEY] = allow_tool(key, self.paths)
        return call

    def deny(self, call_id: str) -> Generation | None:
        """The user refuses a pending call: its result says so (see take_tool_result)."""
        reply = self.reply
        if reply is None or call_id not in {c.id for c in self.pending_calls}:
            return None
        return self.take_tool_result(ToolRan(reply.message_id, call_id, DENIED, "denied"))

    def run_tool(self, call: ToolCall, post: Post) -> None:
        """Thread worker: run a confirmed call and post ToolRan (a failure is an error result
        the model reads, one line)."""
        message_id = self.reply.message_id if self.reply else 0
        try:
            if self.toolbox is None:
                raise EmberError("no tools are configured")
            outcome = self.toolbox.call(call.name, call.arguments_dict)
            text, status = outcome.text, "error" if outcome.is_error else "ok"
        except Exception as exc:  # noqa: BLE001 - the model reads why the call failed
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            text, status = f"the call failed: {reason}", "error"
        post(ToolRan(message_id, call.id, text, status))

    def take_tool_result(self, event: ToolRan) -> Generation | None:
        """Store a call's result; once every call has one, the turn goes on: returns its next
        Generation (the caller runs it like any reply)."""
        reply = self.reply
        if reply is None or reply.message_id != event.message_id or not reply.waiting:
            return None
        call = next((c for c in unanswered(reply.parts) if c.id == event.call_id), None)
        if call is None:
            return None
        reply.parts.append(result_part(call, event.text, event.status))
        self._store(reply, durable=False)
        if unanswered(reply.parts):
            return None
        conv = self.history.conversation(self.ensure_conversation().id)
        base = chat_messages(conv.system_prompt, self.path()[:-1])
        request = dataclasses.replace(
            reply.request, messages=(*base, *assistant_turns(reply.parts, ""))
        )
        follow = Generation(
            reply.message_id, request, reply.options, self._clock, tuple(reply.parts), self._prepare
        )
        follow.round = reply.round + 1
        self.reply = follow
        return follow
