"""Which other programs have a file open: for "locked by sqlite3 (pid 4242)" instead of a guess.

Linux only (it reads /proc/<pid>/fd); elsewhere the answer is empty and the message says
"another program". Best effort: processes of other users are not visible.
"""

from __future__ import annotations

import os
from pathlib import Path


def holders(path: Path) -> list[tuple[int, str]]:
    """(pid, program name) of every other process with path (or its -wal/-shm) open."""
    proc = Path("/proc")
    if not proc.is_dir():
        return []
    wanted = {str(Path(str(path) + suffix).resolve()) for suffix in ("", "-wal", "-shm")}
    found: list[tuple[int, str]] = []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            links = {os.readlink(fd) for fd in (entry / "fd").iterdir()}
            name = (entry / "comm").read_text().strip()
        except OSError:  # gone, or not ours to look at
            continue
        if links & wanted:
            found.append((int(entry.name), name))
    return sorted(found)


def describe_holders(path: Path) -> str:
    """'sqlite3 (pid 4242)' / 'sqlite3 (pid 1), python3 (pid 2)' / 'another program'."""
    found = holders(path)
    return ", ".join(f"{name} (pid {pid})" for pid, name in found) or "another program"
