"""One Ember process at a time owns the history: an exclusive, non-blocking lock on a side file."""

from __future__ import annotations

import os
from pathlib import Path

from ember.app.errors import HistoryError


class HistoryLock:
    """An advisory lock (flock on POSIX, msvcrt on Windows) released on close or process death."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, path: Path) -> HistoryLock:
        """Take the lock or raise HistoryError naming the process that holds it."""
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            _lock(fd)
        except OSError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise HistoryError(
                f"the history {path.with_suffix('')} is in use by another Ember (pid {holder});"
                " close it first"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return cls(path, fd)

    def release(self) -> None:
        """Give the lock back (idempotent)."""
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the lock
            self._fd = None


def _lock(fd: int) -> None:
    try:
        import fcntl
    except ImportError:  # Windows
        import msvcrt

        msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)  # type: ignore[attr-defined]
        return
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
