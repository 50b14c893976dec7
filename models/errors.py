"""Errors of the model-files layer: one type per concern, each with a one-line message."""

from __future__ import annotations

from ember.errors import EmberError


class ModelFileError(EmberError):
    """A model file or folder is unreadable, malformed, unsupported or refused (names the file)."""


class TemplateError(EmberError):
    """A chat template failed to render, or broke the sandbox's rules or limits."""


class DownloadError(EmberError):
    """A Hub lookup or transfer failed; the message says what and how to fix it."""


class RegistryError(EmberError):
    """The local model index cannot resolve, add or remove a model."""
