"""Model output as literal text: the shared terminal-escaping helper (ember/text.py) for the TUI."""

from __future__ import annotations

from ember.text import visible

__all__ = ["visible"]
