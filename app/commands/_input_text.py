"""Text a person hands a command (arguments, stdin) decoded by the one policy of ember/text.py.

Invalid UTF-8 becomes U+FFFD and one warning line on stderr says where and how many; a
byte-order mark selects UTF-16 or UTF-32 (PowerShell pipes UTF-16). Never an exception.
"""

from __future__ import annotations

import os
import sys

from ember.text import Decoded, clean, decode, escape


def argument_text(value: str, what: str) -> str:
    """A command-line argument: Python decoded it with surrogateescape; undo that and decode."""
    try:
        raw = os.fsencode(value)
    except UnicodeError:  # not from the file system encoding: just drop the lone surrogates
        return clean(value)
    return _warned(decode(raw), what)


def stdin_text() -> str:
    """All of stdin as text."""
    buffer = getattr(sys.stdin, "buffer", None)
    if buffer is None:  # a text stream that is not backed by bytes (tests, embedding)
        return clean(sys.stdin.read())
    return _warned(decode(buffer.read()), "stdin")


def _warned(decoded: Decoded, what: str) -> str:
    warning = decoded.warning(what)
    if warning:
        print(f"ember: warning: {escape(warning)}", file=sys.stderr)
    return decoded.text
