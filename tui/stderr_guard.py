"""Keep native libraries' stderr (llama.cpp's loader logs) off the app's screen.

Textual draws on `sys.__stderr__`. While the app runs, file descriptor 2 points at a log file and
Textual gets a duplicate of the terminal, so C code writing to fd 2 cannot scribble over the UI.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def native_stderr_to(log_path: Path) -> Iterator[None]:
    """Send fd 2 to log_path (appending) for the duration; the UI keeps the real terminal."""
    if not sys.__stderr__ or not sys.__stderr__.isatty():
        yield
        return
    log_path.parent.mkdir(parents=True, exist_ok=True)
    saved_fd = os.dup(2)
    terminal = os.fdopen(os.dup(2), "w", buffering=1, encoding="utf-8", errors="replace")
    original = sys.__stderr__
    with log_path.open("ab") as log:
        os.dup2(log.fileno(), 2)
        sys.__stderr__ = terminal  # type: ignore[misc]  # Textual's driver writes here
        try:
            yield
        finally:
            sys.__stderr__ = original  # type: ignore[misc]
            os.dup2(saved_fd, 2)
            os.close(saved_fd)
            terminal.close()
