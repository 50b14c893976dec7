"""Errors of the engine layer."""

from __future__ import annotations

from ember.errors import EmberError


class EngineError(EmberError):
    """The engine cannot load a model or serve a request (names the model or field and the reason)."""
