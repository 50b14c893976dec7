"""One thread owns the Engine; other threads submit requests and get RequestHandles.

Commands (submit, abort, calls) go through an inbox guarded by a condition; the engine thread
drains it between steps, so requests join and leave the running batch between forwards.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from ember.engine.api import (
    EngineInfo,
    EngineOptions,
    EventStream,
    Finished,
    GenerationRequest,
    ModelFiles,
    Stats,
)
from ember.engine.engine import Engine
from ember.engine.errors import EngineError
from ember.errors import EmberError

log = logging.getLogger("ember.engine")


class Handle(EventStream):
    """A submitted request: iterate its events from any thread; abort() stops it early."""

    def __init__(self, owner: EngineThread, request_id: int) -> None:
        super().__init__()
        self._owner = owner
        self.request_id = request_id

    def abort(self) -> None:
        """Ask the engine to stop this request; its Finished event has reason "abort"."""
        self._owner.post("abort", self.request_id)


class EngineThread:
    """The Backend: an Engine driven by its own thread."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._cond = threading.Condition()
        self._inbox: list[tuple[str, Any]] = []
        self._handles: dict[int, Handle] = {}
        self._closing = False
        self._thread = threading.Thread(target=self._loop, name="ember-engine", daemon=True)
        self._thread.start()

    @property
    def info(self) -> EngineInfo:
        return self.engine.info

    def submit(self, request: GenerationRequest) -> Handle:
        """Queue a request; returns at once with its handle."""
        handle = Handle(self, request.request_id)
        if self._closing:
            handle.push(_failed("abort", "engine closed"))
            return handle
        self.post("submit", (request, handle))
        return handle

    def count_tokens(self, request: GenerationRequest) -> int:
        """Prompt tokens of a request (tokenized on the engine thread)."""
        return int(self.call(lambda engine: engine.count_tokens(request)))

    def call(self, fn: Callable[[Engine], Any]) -> Any:
        """Run fn(engine) on the engine thread between steps and return its result."""
        future: Future[Any] = Future()
        self.post("call", (fn, future))
        return future.result()

    def post(self, kind: str, payload: Any) -> None:
        with self._cond:
            self._inbox.append((kind, payload))
            self._cond.notify()

    def close(self) -> None:
        """Abort every request, stop the thread and release the runner."""
        with self._cond:
            if self._closing:
                return
            self._closing = True
            self._cond.notify()
        self._thread.join()

    # ---- the engine thread ----------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            with self._cond:
                while not (self._inbox or self._closing or self.engine.has_work):
                    self._cond.wait()
                commands, self._inbox = self._inbox, []
                closing = self._closing
            for kind, payload in commands:
                self._run_command(kind, payload)
            if closing:
                self._shutdown()
                return
            if self.engine.has_work:
                try:
                    self.engine.step()
                except Exception as exc:  # a bug must not hang every caller
                    log.exception("engine step failed")
                    self._fail_all(f"engine failed: {exc}")

    def _run_command(self, kind: str, payload: Any) -> None:
        if kind == "submit":
            request, handle = payload
            try:
                self.engine.add_request(request, handle.push)
                self._handles[request.request_id] = handle
            except EmberError as exc:  # the request is wrong (template refused, bad grammar)
                handle.push(_failed("error", str(exc), refused=True))
        elif kind == "abort":
            self.engine.abort(payload)
        elif kind == "call":
            fn, future = payload
            try:
                future.set_result(fn(self.engine))
            except Exception as exc:
                future.set_exception(exc)
        self._handles = {k: h for k, h in self._handles.items() if not h.done}

    def _fail_all(self, reason: str) -> None:
        for request_id, handle in list(self._handles.items()):
            try:
                self.engine.abort(request_id)
            except Exception:
                log.exception("abort after failure")
            handle.push(_failed("error", reason))
        self._handles.clear()

    def _shutdown(self) -> None:
        try:
            self.engine.close()
        finally:
            for handle in self._handles.values():
                handle.push(_failed("abort", "engine closed"))
            with self._cond:
                leftover, self._inbox = self._inbox, []
            for kind, payload in leftover:
                if kind == "submit":
                    payload[1].push(_failed("abort", "engine closed"))
                elif kind == "call":
                    payload[1].set_exception(EngineError("engine closed"))


def _failed(reason: str, error: str, refused: bool = False) -> Finished:
    return Finished(
        reason=reason,  # type: ignore[arg-type]
        text="",
        token_ids=(),
        stats=Stats(),
        error=error,
        refused=refused,
    )


def start_engine_thread(
    options: EngineOptions, model: ModelFiles | None, *, draft_model: ModelFiles | None = None
) -> EngineThread:
    """Load the model on the calling thread (errors raise here), then hand it to its thread."""
    return EngineThread(Engine.load(options, model, draft_model=draft_model))
