"""A one-line-per-file progress bar on stderr for downloads (speed and ETA)."""

from __future__ import annotations

import sys
from typing import TextIO

from ember.app.commands._model_format import human_bytes
from ember.text import escape


def _eta(seconds: float | None) -> str:
    if seconds is None:
        return "--:--"
    seconds = int(seconds)
    return (
        f"{seconds // 60:02d}:{seconds % 60:02d}"
        if seconds < 3600
        else f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    )


class ProgressBar:
    """Redraws one line per file on a terminal; prints only finished files otherwise."""

    def __init__(self, stream: TextIO | None = None, width: int = 28) -> None:
        self.stream = stream or sys.stderr
        self.width = width
        self.tty = self.stream.isatty()

    def __call__(self, event: object) -> None:
        done, total = event.bytes_done, max(event.bytes_total, 1)  # type: ignore[attr-defined]
        frac = min(done / total, 1.0)
        filled = int(frac * self.width)
        bar = "#" * filled + "-" * (self.width - filled)
        line = (
            f"{escape(event.file)[-40:]:<40} [{bar}] {frac * 100:5.1f}% "  # type: ignore[attr-defined]
            f"{human_bytes(done)}/{human_bytes(total)} "
            f"{human_bytes(event.speed)}/s ETA {_eta(event.eta)}"  # type: ignore[attr-defined]
        )
        finished = bool(event.done)  # type: ignore[attr-defined]
        if self.tty:
            self.stream.write("\r" + line + ("\n" if finished else ""))
            self.stream.flush()
        elif finished:
            self.stream.write(line + "\n")
