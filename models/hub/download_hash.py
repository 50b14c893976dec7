"""SHA-256 of a growing .part file, computed on a worker thread while the bytes arrive.

hashlib releases the GIL on large updates, so hashing overlaps the network reads instead of
costing a second pass over the finished file. `sync` re-reads the file from disk whenever what was
hashed and what is on disk disagree (a resume in a new process, a restart after Range was ignored).
"""

from __future__ import annotations

import hashlib
import queue
import threading
from pathlib import Path


class PartHasher:
    """Feeds chunks to SHA-256 on a background thread; `hexdigest` waits for the queue to drain."""

    def __init__(self) -> None:
        self._digest = hashlib.sha256()
        self.hashed_bytes = 0
        self._queue: queue.Queue[bytes | None] = queue.Queue(maxsize=32)
        self._thread: threading.Thread | None = None

    def sync(self, part: Path) -> None:
        """Make the digest cover exactly the bytes now in part (re-hashing from disk if needed)."""
        self._drain()
        size = part.stat().st_size if part.exists() else 0
        if size == self.hashed_bytes:
            return
        self._digest = hashlib.sha256()
        self.hashed_bytes = 0
        if size:
            with part.open("rb", buffering=0) as f:
                buffer = memoryview(bytearray(1 << 22))
                while count := f.readinto(buffer):
                    self._digest.update(buffer[:count])
                    self.hashed_bytes += count

    def feed(self, chunk: bytes) -> None:
        """Queue bytes that were just written to the part file."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="sha256", daemon=True)
            self._thread.start()
        self._queue.put(chunk)

    def hexdigest(self) -> str:
        """The digest of every byte fed or synced so far."""
        self._drain()
        return self._digest.hexdigest()

    def _run(self) -> None:
        while (chunk := self._queue.get()) is not None:
            self._digest.update(chunk)
            self.hashed_bytes += len(chunk)

    def _drain(self) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None
