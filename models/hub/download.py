"""Resumable, verified download of one file: `.part` + HTTP Range, SHA-256, atomic rename.

Bytes go to `<dest>.part` (with `<dest>.part.json` naming the digest and size they belong to);
a rerun continues with `Range: bytes=N-` and starts over cleanly if the server answers 200.
The finished file is checked against the Hub's LFS SHA-256 and size, then renamed into place, so a
half-written file never sits under its final name. A file lock (`<dest>.lock`) makes a second
pull of the same file wait and then find it done.
"""

from __future__ import annotations

import errno
import hashlib
import http.client
import json
import os
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ember.models.errors import DownloadError
from ember.models.hub.download_hash import PartHasher
from ember.models.hub.http import RedirectError, Stream, open_stream

_DISK_FULL = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)


@dataclass(frozen=True)
class DownloadProgress:
    """One progress event: bytes so far and in total, speed (bytes/s) and seconds left."""

    file: str
    bytes_done: int
    bytes_total: int
    speed: float  # bytes per second over the current transfer
    eta: float | None  # seconds, None until the speed is known
    done: bool = False


@dataclass(frozen=True)
class RemoteFile:
    """A file to fetch: its URL, where it goes, its size and SHA-256 (None for non-LFS files)."""

    name: str  # the path inside the repo, for messages
    url: str
    dest: Path
    size_bytes: int | None
    sha256: str | None
    git_sha1: str | None = None  # the git blob id, checked for small (non-LFS) files


class DownloadCancelled(DownloadError):
    """The caller cancelled; the .part file is kept for a later resume."""


class _Retry(Exception):
    """A transient failure (connection dropped, timeout, HTTP 5xx): try again from the .part."""


ProgressCallback = Callable[[DownloadProgress], None]


def _free_bytes(folder: Path) -> int:
    return shutil.disk_usage(folder).free


@dataclass
class Downloader:
    """Fetches RemoteFiles with resume, verification, locking and progress events."""

    headers: dict[str, str]
    on_progress: ProgressCallback | None = None
    cancel: threading.Event | None = None
    retries: int = 3
    backoff_s: float = 1.0
    timeout_s: float = 30.0
    chunk_bytes: int = 1 << 20
    free_bytes: Callable[[Path], int] = _free_bytes
    on_wait: Callable[[RemoteFile], None] | None = None  # called when another pull holds the lock

    def fetch(self, remote: RemoteFile) -> Path:
        """Download remote.dest (or find it already complete); DownloadError says what went wrong."""
        from filelock import FileLock, Timeout

        try:
            remote.dest.parent.mkdir(parents=True, exist_ok=True)
            lock = FileLock(str(remote.dest) + ".lock")
            try:
                lock.acquire(timeout=0)
            except Timeout:
                if self.on_wait:
                    self.on_wait(remote)
                lock.acquire()
            try:
                return self._fetch_locked(remote)
            finally:
                lock.release()
        except OSError as exc:  # permissions, a read-only disk, I/O errors: one line, no trace
            raise DownloadError(
                f"{remote.name}: cannot write {remote.dest}: {exc.strerror or exc}"
            ) from None

    def _fetch_locked(self, remote: RemoteFile) -> Path:
        dest = remote.dest
        if dest.exists() and (
            remote.size_bytes is None or dest.stat().st_size == remote.size_bytes
        ):
            self._emit(remote, dest.stat().st_size, 0, time.monotonic(), finished=True)
            return dest
        part = _part_path(dest)
        _check_part_meta(part, remote)
        self._check_disk(remote, part)
        hasher = PartHasher()
        for attempt in range(self.retries + 1):
            try:
                self._transfer(remote, part, hasher)
                break
            except _Retry as exc:
                if attempt == self.retries:
                    kept = part.stat().st_size if part.exists() else 0
                    raise DownloadError(
                        f"{remote.name}: download failed ({exc}); {kept} bytes kept in {part}, "
                        "rerun to resume"
                    ) from None
                time.sleep(self.backoff_s * (2**attempt))
        self._verify(remote, part, hasher)
        os.replace(part, dest)
        _meta_path(part).unlink(missing_ok=True)
        return dest

    def _check_disk(self, remote: RemoteFile, part: Path) -> None:
        if remote.size_bytes is None:
            return
        have = part.stat().st_size if part.exists() else 0
        need = remote.size_bytes - have
        free = self.free_bytes(part.parent)
        if need > free:
            raise DownloadError(
                f"{remote.name}: not enough disk space in {part.parent}: needs {need} bytes, "
                f"{free} free; free some space (see `ember du`) and rerun"
            )

    def _transfer(self, remote: RemoteFile, part: Path, hasher: PartHasher) -> None:
        offset = part.stat().st_size if part.exists() else 0
        if remote.size_bytes is not None and offset > remote.size_bytes:
            part.unlink()
            offset = 0
        if remote.size_bytes is not None and offset == remote.size_bytes:
            return
        headers = dict(self.headers)
        if offset:
            headers["Range"] = f"bytes={offset}-"
        try:
            stream = open_stream(remote.url, headers, self.timeout_s)
        except RedirectError as exc:
            raise DownloadError(f"{remote.name}: {exc}; nothing was downloaded") from None
        except (OSError, http.client.HTTPException) as exc:
            raise _Retry(f"cannot connect: {exc}") from None
        try:
            offset = self._check_status(remote, stream, offset, part)
            hasher.sync(
                part
            )  # covers the bytes already on disk (a resume, or none after a restart)
            self._copy(remote, stream, part, offset, hasher)
        finally:
            stream.close()

    def _check_status(self, remote: RemoteFile, stream: Stream, offset: int, part: Path) -> int:
        """Validate the answer; returns the offset the body starts at (0 if Range was ignored)."""
        status = stream.status
        if status in (401, 403):
            raise DownloadError(f"{remote.name}: {auth_hint(status)}")
        if status == 404:
            raise DownloadError(f"{remote.name}: not found on the Hub (HTTP 404 for {remote.url})")
        if status == 416 and offset and offset == remote.size_bytes:
            return offset
        if status >= 500 or status == 429:
            raise _Retry(f"HTTP {status}")
        if status == 206:
            if stream.headers.get("content-range", "").startswith(f"bytes {offset}-"):
                return offset
            status = 200  # a range we did not ask for: treat as a full answer
        if status != 200:
            raise DownloadError(f"{remote.name}: unexpected HTTP {status} from {remote.url}")
        _refuse_web_page(remote, stream)
        if offset:
            part.unlink()  # the server ignored Range: start over cleanly
        _meta_path(part).write_text(
            json.dumps({"sha256": remote.sha256, "size": remote.size_bytes})
        )
        return 0

    def _copy(
        self, remote: RemoteFile, stream: Stream, part: Path, offset: int, hasher: PartHasher
    ) -> None:
        started, last_emit, done = time.monotonic(), 0.0, offset
        fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            while True:
                if self.cancel is not None and self.cancel.is_set():
                    raise DownloadCancelled(
                        f"{remote.name}: cancelled; {done} bytes kept in {part}, rerun to resume"
                    )
                try:
                    chunk = stream.read_some(self.chunk_bytes)
                except (TimeoutError, OSError, http.client.HTTPException) as exc:
                    raise _Retry(f"connection lost after {done} bytes: {exc}") from None
                if not chunk:
                    break
                _write_all(fd, memoryview(chunk), remote, part)
                hasher.feed(chunk)
                done += len(chunk)
                now = time.monotonic()
                if now - last_emit >= 0.1:
                    self._emit(remote, done, offset, started)
                    last_emit = now
        finally:
            os.close(fd)
        if remote.size_bytes is not None and done < remote.size_bytes:
            raise _Retry(f"connection closed after {done} of {remote.size_bytes} bytes")
        self._emit(remote, done, offset, started, finished=True)

    def _emit(
        self,
        remote: RemoteFile,
        bytes_done: int,
        offset: int,
        started: float,
        finished: bool = False,
    ) -> None:
        if self.on_progress is None:
            return
        elapsed = max(time.monotonic() - started, 1e-6)
        speed = (bytes_done - offset) / elapsed if bytes_done > offset else 0.0
        total = remote.size_bytes if remote.size_bytes is not None else bytes_done
        eta = (total - bytes_done) / speed if speed > 0 else None
        self.on_progress(DownloadProgress(remote.name, bytes_done, total, speed, eta, finished))

    def _verify(self, remote: RemoteFile, part: Path, hasher: PartHasher) -> None:
        size = part.stat().st_size
        if remote.size_bytes is not None and size != remote.size_bytes:
            part.unlink()
            raise DownloadError(
                f"{remote.name}: size mismatch ({size} bytes, the Hub says {remote.size_bytes}); "
                "the partial file was deleted, rerun to download again"
            )
        if remote.sha256 is not None:
            hasher.sync(part)
            got, want, kind = hasher.hexdigest(), remote.sha256, "SHA-256"
        elif remote.git_sha1 is not None:
            got, want, kind = git_blob_sha1(part), remote.git_sha1, "git blob SHA-1"
        else:
            return
        if got != want:
            part.unlink()
            _meta_path(part).unlink(missing_ok=True)
            raise DownloadError(
                f"{remote.name}: {kind} mismatch (got {got}, the Hub says {want}); "
                "the corrupt file was deleted, rerun to download again"
            )


def _refuse_web_page(remote: RemoteFile, stream: Stream) -> None:
    """An HTML page where a model file was asked for: a captive portal or a proxy's login."""
    kind = stream.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind in ("text/html", "application/xhtml+xml") and not remote.name.endswith(
        (".html", ".htm")
    ):
        raise DownloadError(
            f"{remote.name}: {stream.url} answered a web page ({kind}) instead of the file; "
            "a captive portal or proxy login may be in the way. Nothing was written"
        )


def _write_all(fd: int, data: memoryview, remote: RemoteFile, part: Path) -> None:
    """os.write until every byte is written; disk full becomes a DownloadError."""
    while data:
        try:
            written = os.write(fd, data)
        except OSError as exc:
            if exc.errno in _DISK_FULL:
                kept = os.fstat(fd).st_size
                raise DownloadError(
                    f"{remote.name}: disk full while writing {part} ({kept} bytes kept); "
                    "free some space and rerun to resume"
                ) from None
            raise
        data = data[written:]


def git_blob_sha1(path: Path) -> str:
    """Git's object id of a file: SHA-1 over b"blob <size>\\0" + content (small files only)."""
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def sha256_of(path: Path) -> str:
    """Hex SHA-256 of a file."""
    digest = hashlib.sha256()
    with path.open("rb", buffering=0) as f:
        buffer = memoryview(bytearray(1 << 22))
        while count := f.readinto(buffer):
            digest.update(buffer[:count])
    return digest.hexdigest()


def auth_hint(status: int) -> str:
    """What to do about a 401/403 from the Hub."""
    return (
        f"access denied (HTTP {status}): the repo is gated or private. Accept its terms on the "
        "Hub if it is gated, then log in with `hf auth login` or set HF_TOKEN"
    )


def _part_path(dest: Path) -> Path:
    return dest.with_name(dest.name + ".part")


def _meta_path(part: Path) -> Path:
    return part.with_name(part.name + ".json")


def _check_part_meta(part: Path, remote: RemoteFile) -> None:
    """Drop a .part that belongs to another version of the file."""
    if not part.exists():
        return
    try:
        meta = json.loads(_meta_path(part).read_text())
    except (OSError, ValueError):
        meta = None
    if meta != {"sha256": remote.sha256, "size": remote.size_bytes}:
        part.unlink()
