"""What a long wait is doing and how far, for a terminal: `ember run`'s stderr (the TUI shows the
same callbacks in its status bar).

A WaitReporter is an EngineOptions.progress callback (stage, done, total) from the loading
thread (the CPU kernels prepared, weights packed or loaded layer by layer) and the engine thread
(a long prompt's prefill, chunk by chunk). Nothing is written for a wait shorter than delay_s
(2 s): a quick load stays silent. Inside `waiting(what)` a ticker keeps the line alive while a
stage runs without callbacks (a compile, a llama.cpp load), with the seconds so far. On a
terminal the line is rewritten in place; elsewhere (a log) a line when the stage changes, and
every log_interval_s while it lasts.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO


class WaitReporter:
    """Progress lines on stream, once a wait has lasted delay_s."""

    def __init__(
        self,
        stream: TextIO,
        *,
        delay_s: float = 2.0,
        log_interval_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream, self.delay_s, self.clock = stream, delay_s, clock
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.interval_s = 0.25 if self.tty else log_interval_s
        self._lock = threading.Lock()
        self._started = clock()  # when the wait began (start(), waiting())
        self._what = ""  # the wait's name, shown until a stage is known
        self._stage, self._done, self._total = "", 0, 0
        self._written_at = -1e18
        self._written_stage = ""
        self._open = False  # a tty line waits for its newline

    def __call__(self, stage: str, done: int, total: int) -> None:
        with self._lock:
            self._stage, self._done, self._total = stage, done, total
            self._maybe_write(last=done >= total)

    def _tick(self) -> None:
        with self._lock:
            self._maybe_write(last=False)

    def _maybe_write(self, last: bool) -> None:
        now = self.clock()
        if now - self._started < self.delay_s or not (self._stage or self._what):
            return
        changed = self._stage != self._written_stage
        if not (last or changed) and now - self._written_at < self.interval_s:
            return
        self._write(self._line(now), last and bool(self._stage))
        self._written_at, self._written_stage = now, self._stage

    def _line(self, now: float) -> str:
        seconds = f"{now - self._started:.0f} s"
        if not self._stage:
            return f"{self._what}..., {seconds}"
        unit = " tokens" if self._stage == "prefill" else ""
        pct = f" ({100 * self._done // self._total}%)" if self._total > 1 else ""
        return f"{self._stage} {self._done}/{self._total}{unit}{pct}, {seconds}"

    def _write(self, text: str, last: bool) -> None:
        if self.tty:
            self.stream.write(f"\r\033[Kember: {text}" + ("\n" if last else ""))
            self._open = not last
        else:
            self.stream.write(f"ember: {text}\n")
        self.stream.flush()

    def start(self, what: str = "") -> None:
        """A new wait begins now (a model load, a request about to be prefilled)."""
        with self._lock:
            self._started, self._what = self.clock(), what
            self._stage, self._written_stage = "", ""

    def finish(self) -> None:
        """End a line left open (before the reply's text goes to the same terminal)."""
        with self._lock:
            if self._open:
                self.stream.write("\n")
                self.stream.flush()
                self._open = False

    @contextmanager
    def waiting(self, what: str) -> Iterator[None]:
        """A wait named what (`loading gemma3-270m`): its stages, or its name, with the seconds
        so far once it passes delay_s; how long it took at the end, if anything was shown."""
        self.start(what)
        stop = threading.Event()

        def tick() -> None:
            while not stop.wait(min(self.interval_s, self.delay_s)):
                self._tick()

        ticker = threading.Thread(target=tick, name="ember-wait", daemon=True)
        ticker.start()
        try:
            yield
        finally:
            stop.set()
            ticker.join()
            self.finish()
            with self._lock:
                if self._written_stage or self._written_at > self._started:
                    took = self.clock() - self._started
                    self.stream.write(f"ember: {what}: done in {took:.1f} s\n")
                    self.stream.flush()
                self._what, self._stage = "", ""
