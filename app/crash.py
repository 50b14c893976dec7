"""An unexpected exception (a bug, or a file no validator caught yet) as one line for the person
and its traceback kept in the log: a command never ends in a wall of Python internals, and never
exits 0 after one.

The log is the cache folder's engine.log, the file the chat app already sends native stderr to,
so `ember doctor`'s paths name it and a bug report has one file to attach.
"""

from __future__ import annotations

import traceback
from pathlib import Path


def log_path() -> Path:
    """Where tracebacks are kept (EMBER_HOME moves it with the cache folder)."""
    from ember.paths import get_paths

    return get_paths().cache_dir / "engine.log"


def report(what: str, exc: BaseException, log: Path | None = None) -> str:
    """Append exc's traceback to the log; the one line that says what stopped on what, and where
    the details are (the log is named even when it could not be written: the line says so)."""
    from ember.text import describe

    log = log or log_path()
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("a", encoding="utf-8", errors="replace") as f:
            f.write(f"--- {what}\n{''.join(traceback.format_exception(exc))}")
        where = f"details in {log}"
    except OSError as err:
        where = f"the traceback could not be written to {log}: {err.strerror or err}"
    return f"{what} stopped on {describe(exc)} ({where})"
