"""One thread owns the Engine; other threads submit requests and get RequestHandles.

Commands (submit, abort, calls) go through an inbox guarded by a condition; the engine thread
drains it between steps, so requests join and leave the running batch between forwards.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from ember.engine.api import (
    EngineInfo,
    EngineOptions,
    EventStream,
    Finished,
    FinishReason,
    GenerationRequest,
    Health,
    ModelFiles,
    Stats,
)
from ember.engine.engine import Engine
from ember.engine.errors import EngineError
from ember.errors import EmberError
from ember.text import describe

log = logging.getLogger("ember.engine")
_POLL_S = 0.5  # how often a waiting call() checks that the engine thread is still alive
MAX_RESTARTS = 3  # restarts of the serving loop allowed within RESTART_WINDOW_S
RESTART_WINDOW_S = 60.0


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
    """The Backend: an Engine driven by its own thread.

    A failure inside one request (any exception, in its submit, its step or its abort) ends that
    request with an error event and frees its blocks; the thread keeps serving. A step failure
    that cannot be pinned on one request ends the requests in the engine, and if the engine
    still cannot make progress afterwards it is marked dead: health() says so and every later
    submit or call fails at once instead of waiting forever.
    """

    def __init__(self, engine: Engine, *, wedged_after_s: float = 120.0) -> None:
        self.engine = engine
        self.wedged_after_s = wedged_after_s
        self._cond = threading.Condition()
        self._inbox: list[tuple[str, Any]] = []
        self._pending: list[tuple[str, Any]] = []  # taken from the inbox, not yet run
        self.restarts = 0  # times the watchdog restarted the serving loop
        self._handles: dict[int, Handle] = {}
        self._closing = False
        self._failure = ""  # why the engine cannot serve any more ("" while it can)
        self._busy_since: float | None = None  # monotonic start of the running step or command
        self._engine_closed = False
        self._thread = threading.Thread(target=self._loop, name="ember-engine", daemon=True)
        self._thread.start()

    @property
    def info(self) -> EngineInfo:
        return self.engine.info

    def submit(self, request: GenerationRequest) -> Handle:
        """Queue a request; returns at once with its handle."""
        handle = Handle(self, request.request_id)
        self.post("submit", (request, handle))
        return handle

    def count_tokens(self, request: GenerationRequest) -> int:
        """Prompt tokens of a request (tokenized on the engine thread); EngineError on failure."""
        try:
            return int(self.call(lambda engine: engine.count_tokens(request)))
        except EmberError:
            raise
        except Exception as exc:  # the same isolation as submit: one line, the engine goes on
            log.exception("counting tokens failed")
            raise EngineError(f"counting tokens failed: {describe(exc)}") from exc

    def call(self, fn: Callable[[Engine], Any]) -> Any:
        """Run fn(engine) on the engine thread between steps and return its result."""
        future: Future[Any] = Future()
        self.post("call", (fn, future))
        while True:
            try:
                return future.result(timeout=_POLL_S)
            except FutureTimeout:
                if self._failure or not self._thread.is_alive():
                    raise EngineError(self._failure or "engine thread stopped") from None

    def health(self) -> Health:
        """ok / wedged (one step past wedged_after_s) / dead / closed; never blocks."""
        if self._closing:
            return Health("closed", "engine closed")
        if self._failure:
            return Health("dead", self._failure)
        if not self._thread.is_alive():
            return Health("dead", "engine thread stopped")
        since = self._busy_since
        if since is not None and (busy_s := time.monotonic() - since) > self.wedged_after_s:
            return Health("wedged", f"one engine step has run for {busy_s:.0f} s")
        return Health("ok")

    def post(self, kind: str, payload: Any) -> None:
        """Queue a command for the engine thread (refused at once once it cannot run)."""
        with self._cond:
            refusal = "engine closed" if self._closing else self._failure
            if not refusal:
                self._inbox.append((kind, payload))
                self._cond.notify()
                return
        _refuse(kind, payload, "abort" if self._closing else "error", refusal)

    def close(self) -> None:
        """Abort every request, stop the thread and release the runner."""
        with self._cond:
            if self._closing:
                return
            self._closing = True
            self._cond.notify()
        self._thread.join()
        if not self._engine_closed:  # the thread died before it could release the runner
            self._close_engine()

    # ---- the engine thread ----------------------------------------------------------------
    def _loop(self) -> None:
        """The thread's body and its watchdog: an exception that escapes the serving loop ends
        the requests in flight and the loop starts again (at most MAX_RESTARTS times within
        RESTART_WINDOW_S, and only once the engine is idle); past that, or on a BaseException
        (SystemExit, KeyboardInterrupt), the engine is dead and says so."""
        recent: list[float] = []
        while True:
            try:
                self._serve()
                return
            except Exception as exc:
                log.exception("engine thread failed")
                reason = f"engine thread failed: {describe(exc)}"
                self._busy_since = None
                self._fail_all(reason)
                now = time.monotonic()
                recent = [t for t in recent if now - t < RESTART_WINDOW_S] + [now]
                if len(recent) > MAX_RESTARTS or not self._idle_after_failure():
                    self._die(f"engine thread stopped: {describe(exc)}")
                    return
                self.restarts += 1
                log.warning("engine thread restarted (%d so far) after: %s", self.restarts, reason)
            except BaseException as exc:  # noqa: BLE001 - the thread must never end silently
                log.exception("engine thread stopped")
                self._die(f"engine thread stopped: {describe(exc)}")
                return

    def _idle_after_failure(self) -> bool:
        try:
            return not self.engine.has_work
        except Exception:
            log.exception("engine state unreadable after a failure")
            return False

    def _die(self, reason: str) -> None:
        with self._cond:
            self._failure = reason
            self._inbox = self._pending + self._inbox
            self._pending = []
        self._fail_all(self._failure)
        self._drain_inbox("error", self._failure)

    def _serve(self) -> None:
        while True:
            with self._cond:
                while not (self._inbox or self._pending or self._closing or self._has_work):
                    self._cond.wait()
                self._pending += self._inbox
                self._inbox = []
                closing = self._closing
            while self._pending:  # one at a time: a failure leaves the rest queued
                kind, payload = self._pending.pop(0)
                self._busy_since = time.monotonic()
                self._run_command(kind, payload)
                self._busy_since = None
            if closing:
                self._shutdown()
                return
            if self._has_work:
                self._step()

    @property
    def _has_work(self) -> bool:
        return not self._failure and self.engine.has_work

    def _step(self) -> None:
        self._busy_since = time.monotonic()
        try:
            self.engine.step()
        except Exception as exc:  # the engine could not pin it on one request: end them all
            log.exception("engine step failed")
            self._fail_all(f"engine step failed: {describe(exc)}")
            if self.engine.has_work:  # aborting did not empty it: it cannot make progress
                with self._cond:
                    self._failure = f"engine stuck after a failed step: {describe(exc)}"
                self._drain_inbox("error", self._failure)
        finally:
            self._busy_since = None

    def _run_command(self, kind: str, payload: Any) -> None:
        if kind == "submit":
            request, handle = payload
            try:
                self.engine.add_request(request, handle.push)
                self._handles[request.request_id] = handle
            except EmberError as exc:  # the request is wrong (template refused, bad grammar)
                handle.push(_failed("error", str(exc), refused=True))
            except Exception as exc:  # a bug on this request's path ends this request only
                log.exception("request %d refused", request.request_id)
                handle.push(_failed("error", f"request failed: {describe(exc)}"))
        elif kind == "abort":
            try:
                self.engine.abort(payload)
            except Exception as exc:
                log.exception("abort of request %d failed", payload)
                self._forget(payload, f"abort failed: {describe(exc)}")
        elif kind == "call":
            fn, future = payload
            try:
                future.set_result(fn(self.engine))
            except Exception as exc:
                future.set_exception(exc)
        self._handles = {k: h for k, h in self._handles.items() if not h.done}

    def _forget(self, request_id: int, reason: str) -> None:
        handle = self._handles.pop(request_id, None)
        if handle is not None:
            handle.push(_failed("error", reason))

    def _fail_all(self, reason: str) -> None:
        for request_id, handle in list(self._handles.items()):
            try:
                self.engine.fail_request(request_id, reason)
            except Exception:
                log.exception("ending request %d after a failure", request_id)
            handle.push(_failed("error", reason))  # ignored if it already finished
        self._handles.clear()

    def _drain_inbox(self, reason: FinishReason, error: str) -> None:
        with self._cond:
            leftover, self._inbox = self._inbox, []
        for kind, payload in leftover:
            _refuse(kind, payload, reason, error)

    def _close_engine(self) -> None:
        self._engine_closed = True
        try:
            self.engine.close()
        except Exception:
            log.exception("closing the engine failed")

    def _shutdown(self) -> None:
        try:
            self._close_engine()
        finally:
            for handle in self._handles.values():
                handle.push(_failed("abort", "engine closed"))
            self._drain_inbox("abort", "engine closed")


def _refuse(kind: str, payload: Any, reason: FinishReason, error: str) -> None:
    """Answer a command the engine thread will never run."""
    if kind == "submit":
        payload[1].push(_failed(reason, error))
    elif kind == "call":
        payload[1].set_exception(EngineError(error))


def _failed(reason: FinishReason, error: str, refused: bool = False) -> Finished:
    return Finished(
        reason=reason, text="", token_ids=(), stats=Stats(), error=error, refused=refused
    )


def start_engine_thread(
    options: EngineOptions, model: ModelFiles | None, *, draft_model: ModelFiles | None = None
) -> EngineThread:
    """Load the model on the calling thread (errors raise here), then hand it to its thread."""
    return EngineThread(Engine.load(options, model, draft_model=draft_model))
