"""Generation: one reply being generated; `follow` is the thread worker's loop over its events."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from textual.message import Message

from ember.app.history.parts import MessagePart, joined_text
from ember.app.reply_splitter import ReplySplitter
from ember.engine.api import (
    Backend,
    EngineError,
    EngineOptions,
    Finished,
    GenerationRequest,
    RequestHandle,
    TextDelta,
    ToolCall,
)
from ember.tui.chat.reply_parts import add_text
from ember.tui.messages import ReplyDelta, ReplyFinished, ReplyStarted

POST_INTERVAL_S = 0.1  # coalesce deltas: at most 10 UI updates a second, whatever the tok/s

Post = Callable[[Message], object]  # a screen's post_message (thread-safe)
Clock = Callable[[], float]
Prepare = Callable[[GenerationRequest, Backend], GenerationRequest]


class Generation:
    """The reply stored as message_id: its request, and the text shown so far.

    The worker thread only calls `follow`; the UI thread adds deltas (`add`) and may call
    `stop()` at any time, before or after the request was submitted.
    """

    def __init__(
        self,
        message_id: int,
        request: GenerationRequest,
        options: EngineOptions,
        clock: Clock = time.monotonic,
        parts: tuple[MessagePart, ...] = (),
        prepare: Prepare | None = None,
    ) -> None:
        self.message_id = message_id
        self.request = request
        self.options = options
        # the reply so far: reasoning and text (UI thread), tool calls and results; a turn that
        # goes on after tool results starts with the earlier rounds' parts
        self.parts: list[MessagePart] = list(parts)
        self.prepare = prepare  # worker: the final request once the backend is known
        self.round = 0  # tool rounds before this one in the same turn
        self.waiting = False  # finished with tool calls: waits for their results
        self.num_tokens = 0
        self.prompt_tokens: int | None = None  # known once the worker counted them
        self._clock = clock
        self.started_s = clock()
        self._stop = threading.Event()
        self._handle: RequestHandle | None = None

    def stop(self) -> None:
        """Abort the request (or stop it before it starts)."""
        self._stop.set()
        handle = self._handle
        if handle is not None:
            handle.abort()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    @property
    def text(self) -> str:
        """The reply's text (its text parts; reasoning and tool calls apart)."""
        return joined_text(self.parts)

    def add(self, text: str, num_tokens: int, reasoning: str = "") -> None:
        """Take a delta the worker posted (UI thread)."""
        add_text(self.parts, "reasoning", reasoning)
        add_text(self.parts, "text", text)
        self.num_tokens += num_tokens

    @property
    def tok_s(self) -> float:
        """Tokens per second since the reply started (load and prefill included)."""
        return self.num_tokens / max(self._clock() - self.started_s, 1e-6)

    def follow(self, backend: Backend, post: Post) -> None:
        """Submit the request and post its events as ReplyDelta (coalesced) and ReplyFinished.

        The reply is split as it streams (models/text: the think splitter, then the tool-call
        parser of the model's format): reasoning and text go out as they become certain, tool
        calls with ReplyFinished. Raises when the backend does; a stream without a Finished event
        raises RuntimeError.
        """
        if self.prepare is not None:
            self.request = self.prepare(self.request, backend)
        splitter = ReplySplitter(backend.info.tool_format, bool(self.request.offered_tools))
        try:  # for the live context fill; a backend that cannot count still replies
            self.prompt_tokens = backend.count_tokens(self.request)
        except EngineError:
            self.prompt_tokens = None
        handle = backend.submit(self.request)
        self._handle = handle
        post(ReplyStarted(self.message_id, self.prompt_tokens))
        if self._stop.is_set():
            handle.abort()
        text, reasoning, num_tokens, last_post = "", "", 0, float("-inf")
        calls: list[ToolCall] = []
        for event in handle:
            if isinstance(event, TextDelta):
                more_reasoning, more_text, more_calls = splitter.feed(event.text)
                text, reasoning = text + more_text, reasoning + more_reasoning
                calls += more_calls
                num_tokens += max(len(event.token_ids), 1)
                now = self._clock()
                # a slow stream posts every token; a fast one is batched per interval
                if now - last_post >= POST_INTERVAL_S:
                    post(ReplyDelta(self.message_id, text, num_tokens, reasoning))
                    text, reasoning, num_tokens, last_post = "", "", 0, now
            elif isinstance(event, Finished):
                more_reasoning, more_text, more_calls = splitter.feed("", final=True)
                text, reasoning = text + more_text, reasoning + more_reasoning
                if text or reasoning or num_tokens:
                    post(ReplyDelta(self.message_id, text, num_tokens, reasoning))
                post(ReplyFinished(self.message_id, event, tuple(calls + more_calls)))
                return
        raise RuntimeError("the engine ended the stream without a Finished event")
