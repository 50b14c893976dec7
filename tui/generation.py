"""The generation worker: runs on a thread, loads the model if needed, posts events to the screen."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from textual.message import Message

from ember.engine.api import EngineOptions, Finished, GenerationRequest, RequestHandle, TextDelta
from ember.tui.backend_host import BackendHost
from ember.tui.messages import BackendLoaded, ReplyDelta, ReplyFailed, ReplyFinished

POST_INTERVAL_S = 0.1  # coalesce deltas: at most 10 UI updates a second, whatever the tok/s


class Generation:
    """One reply being generated; `stop()` is safe from the UI thread at any time."""

    def __init__(self, message_id: int) -> None:
        self.message_id = message_id
        self.text = ""
        self._stop = threading.Event()
        self._handle: RequestHandle | None = None

    def stop(self) -> None:
        """Abort the request (or stop it before it starts)."""
        self._stop.set()
        handle = self._handle
        if handle is not None:
            handle.abort()

    def run(
        self,
        host: BackendHost,
        options: EngineOptions,
        request: GenerationRequest,
        post: Callable[[Message], object],
    ) -> None:
        """Worker body: load, submit, forward every event as a Message. Never raises."""
        try:
            loaded = host.info
            backend = host.get(options)
            if loaded is None or loaded != backend.info:
                post(BackendLoaded(backend.info))
            handle = backend.submit(request)
            self._handle = handle
            if self._stop.is_set():
                handle.abort()
            pending, num_tokens, last_post = "", 0, 0.0
            for event in handle:
                if isinstance(event, TextDelta):
                    pending += event.text
                    num_tokens += max(len(event.token_ids), 1)
                    now = time.monotonic()
                    # a slow stream posts every token; a fast one is batched per interval
                    if now - last_post >= POST_INTERVAL_S:
                        post(ReplyDelta(self.message_id, pending, num_tokens))
                        pending, num_tokens, last_post = "", 0, now
                elif isinstance(event, Finished):
                    if pending:
                        post(ReplyDelta(self.message_id, pending, num_tokens))
                    post(ReplyFinished(self.message_id, event))
                    return
            raise RuntimeError("the engine ended the stream without a Finished event")
        except Exception as exc:  # noqa: BLE001 - any failure becomes a one-line notification
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            post(ReplyFailed(self.message_id, reason))
