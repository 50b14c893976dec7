"""Errors of the application layer."""

from __future__ import annotations

from ember.errors import EmberError


class ConfigError(EmberError):
    """The settings file or an environment override is invalid (names the key and the reason)."""


class HistoryError(EmberError):
    """The conversation database is unusable, locked by another instance, or was moved aside."""
