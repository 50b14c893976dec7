"""Files a person names (a flag, an argument, `/file`, an import): checked before they are read.

Every such path goes through `open_user_file`: symlinks are resolved, and the file opened
without blocking (a FIFO would otherwise hang the open) and checked on the open descriptor (so a
file swapped after a check is still caught): it must be a regular file, not a FIFO, a device
(/dev/zero and /dev/urandom never end), a socket or a folder, and at most `max_bytes` long. Reads
stop one byte past the cap, so a file that grows while read is caught too. Errors are one line:
`PATH: reason`, naming what the file was for.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ember.errors import EmberError
from ember.text import escape, utf8_problem

MIB = 1024 * 1024


class UserFileError(EmberError):
    """A user-given path is missing, unreadable, not a regular file, or too large."""


_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _size(n: int) -> str:
    return f"{n / MIB:,.1f} MiB" if n >= MIB else f"{n:,} bytes"


def _fail(path: Path | str, what: str, reason: str) -> UserFileError:
    label = f" ({what})" if what else ""
    return UserFileError(f"{escape(str(path))}{label}: {reason}")


def check_user_file(path: Path | str, what: str = "", max_bytes: int | None = None) -> Path:
    """The resolved path of a regular file of at most max_bytes (UserFileError otherwise);
    does not read it."""
    fd = _open(path, what)
    try:
        _check(os.fstat(fd), path, what, max_bytes)
    finally:
        os.close(fd)
    return Path(os.path.realpath(path))


def read_user_bytes(path: Path | str, what: str, max_bytes: int) -> bytes:
    """The whole file, checked (regular, at most max_bytes) before and while it is read."""
    fd = _open(path, what)
    try:
        _check(os.fstat(fd), path, what, max_bytes)
        os.set_blocking(fd, True)
        chunks, total = [], 0
        while chunk := os.read(fd, min(8 * MIB, max_bytes + 1 - total)):
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:
                raise _fail(path, what, f"more than the {_size(max_bytes)} limit (it grew)")
        return b"".join(chunks)
    except OSError as exc:
        raise _fail(path, what, f"cannot read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)


def read_user_text(path: Path | str, what: str, max_bytes: int) -> str:
    """The file as UTF-8 text (a BOM allowed), checked like read_user_bytes."""
    data = read_user_bytes(path, what, max_bytes)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _fail(path, what, utf8_problem(exc)) from None


def _open(path: Path | str, what: str) -> int:
    try:
        real = os.path.realpath(path)
        return os.open(real, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise _fail(path, what, "cannot read (no such file)") from None
    except OSError as exc:
        raise _fail(path, what, f"cannot read ({exc.strerror or exc})") from None
    except ValueError:  # a NUL in the path
        raise _fail(path, what, "not a valid path") from None


def _check(info: os.stat_result, path: Path | str, what: str, max_bytes: int | None) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise _fail(path, what, f"{_kind(info.st_mode)}, not a regular file")
    if max_bytes is not None and info.st_size > max_bytes:
        limit = _size(max_bytes)
        raise _fail(path, what, f"{info.st_size:,} bytes is more than the {limit} limit")
