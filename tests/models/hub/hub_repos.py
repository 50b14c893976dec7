"""The fake Hub's data: repos and their files, injected faults, and the shared server state."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Fault:
    """What goes wrong when a file is fetched; `times` counts how many requests it affects."""

    status: int | None = None  # answer this HTTP status instead of the file
    drop_after: int | None = None  # close the connection after this many body bytes
    stall_after: int | None = None  # stop after this many body bytes until release() or close
    corrupt: bool = False  # flip one byte in the middle of the body
    ignore_range: bool = False  # answer 200 with the whole file even when Range is asked
    redirect: str | None = None  # answer 302 to this Location ("SELF": the same URL, a loop)
    page: tuple[str, bytes] | None = None  # answer 200 with (content type, body): a portal
    times: int = 1_000_000


@dataclass
class FakeRepo:
    """One model repo: files by path (LFS unless listed in small_files), a commit and stats."""

    repo_id: str
    files: dict[str, bytes]
    downloads: int = 0
    tags: list[str] = field(default_factory=list)
    small_files: set[str] = field(default_factory=set)  # served as regular (non-LFS) git files
    parameters: int = 1000
    commit: str = ""

    def __post_init__(self) -> None:
        if not self.commit:
            digest = hashlib.sha1(self.repo_id.encode())
            for name in sorted(self.files):
                digest.update(name.encode() + hashlib.sha1(self.files[name]).digest())
            self.commit = digest.hexdigest()

    def is_lfs(self, path: str) -> bool:
        return path not in self.small_files and not path.endswith((".json", ".md", ".txt"))

    def entry(self, path: str) -> dict[str, object]:
        """The file's metadata as the Hub publishes it (LFS sha256 for large files)."""
        data = self.files[path]
        if self.is_lfs(path):  # git stores a pointer file; its blob id is what the Hub lists
            sha = hashlib.sha256(data).hexdigest()
            pointer = (
                f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha}\nsize {len(data)}\n"
            )
            blob = _git_blob_id(pointer.encode())
        else:
            blob = _git_blob_id(data)
        out: dict[str, object] = {"size": len(data), "blobId": blob}
        if self.is_lfs(path):
            out["lfs"] = {
                "sha256": hashlib.sha256(data).hexdigest(),
                "size": len(data),
                "pointerSize": 134,
            }
        return out


def _git_blob_id(data: bytes) -> str:
    """Git's object id of a blob: SHA-1 over b"blob <size>\\0" + data."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class HubState:
    """Repos, faults, per-file byte counters and the stall gate, shared by all handler threads."""

    def __init__(self) -> None:
        self.repos: dict[str, FakeRepo] = {}
        self.faults: dict[tuple[str, str], Fault] = {}
        self.repo_status: dict[str, int] = {}  # repo_id -> status for every request on it
        self.bytes_served: dict[tuple[str, str], int] = {}
        # repo_id -> (content type, body) answered for its model info instead of the JSON
        self.info_pages: dict[str, tuple[str, bytes]] = {}
        # repo_id -> a function that rewrites its model info JSON (wrong types, bad values)
        self.info_patches: dict[str, Callable[[dict[str, Any]], Any]] = {}
        self.requests: list[tuple[str, str, str | None]] = []  # (method, path, Range)
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self.release_stall = threading.Event()
        self.closing = threading.Event()

    def count(self, key: tuple[str, str], num_bytes: int) -> None:
        with self.changed:
            self.bytes_served[key] = self.bytes_served.get(key, 0) + num_bytes
            self.changed.notify_all()

    def take_fault(self, key: tuple[str, str]) -> Fault | None:
        with self.lock:
            fault = self.faults.get(key)
            if fault is None or fault.times <= 0:
                return None
            fault.times -= 1
            return fault
