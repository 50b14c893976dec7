"""Text files attached to a message: read and checked (exists, a file, text, not too large), and
their size in the model's tokens against its context.

A file that cannot be attached is one line (`AttachError`) naming it and the reason; the message
the user was writing stays where it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ember.engine.api import Backend, GenerationRequest
from ember.errors import EmberError
from ember.tui.chat.config import file_block
from ember.user_files import UserFileError, read_user_bytes

MAX_FILE_BYTES = 8 * 1024 * 1024  # read no more than this; any context is full long before
_SNIFF_BYTES = 8192


class AttachError(EmberError):
    """A file could not be attached (one line naming it)."""


@dataclass(frozen=True)
class Attachment:
    """A text file ready to go with the next message."""

    path: Path
    text: str
    tokens: int  # what it costs in the context (its file block, in the chat model's tokens)

    @property
    def name(self) -> str:
        return self.path.name


def read_text_file(path: Path) -> str:
    """The file's text (UTF-8, a BOM allowed); AttachError for a missing path, anything but a
    regular file (a folder, a FIFO, a device), a file too large or one that is not text."""
    try:
        data = read_user_bytes(path, "", MAX_FILE_BYTES)
    except UserFileError as exc:
        raise AttachError(str(exc)) from None
    if b"\x00" in data[:_SNIFF_BYTES]:
        raise AttachError(f"{path}: a binary file, not text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise AttachError(f"{path}: not UTF-8 text (byte {exc.start}): a binary file?") from None


def attach(path: Path, backend: Backend) -> Attachment:
    """Read path and count its tokens with the loaded model; AttachError when it cannot go in
    (more tokens than the whole context). Blocking: call it from a thread worker."""
    path = path.expanduser()
    text = read_text_file(path)
    request = GenerationRequest(prompt=file_block(path.name, text), add_bos=False)
    tokens = backend.count_tokens(request)
    limit = backend.info.context_limit
    if limit and tokens > limit:
        raise AttachError(
            f"{path}: {tokens:,} tokens is more than the model's whole context ({limit:,})"
        )
    return Attachment(path, text, tokens)
