"""The base error every layer's error derives from; the CLI prints any EmberError in one line."""

from __future__ import annotations


class EmberError(Exception):
    """An expected failure with a one-line, user-facing message naming the thing and the reason."""
