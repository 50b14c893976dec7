"""A system message for a template that refuses one: folded into the first user turn.

Some chat templates raise on a system role (Gemma 2's: "System role not supported"); clients
send one all the time (an OpenAI request with a system prompt, `ember run --system`). Gemma's
own guidance is to put such instructions at the start of the user turn, which is what Gemma 3's
template does by itself; we do the same for a template that refuses, once, and only when the
conversation starts with a system message.
"""

from __future__ import annotations

from typing import Any

from ember.models.errors import TemplateError


class TemplateRefused(TemplateError):
    """The template's own raise_exception stopped the render (its message says why)."""


def fold_system(messages: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """messages with a leading system message joined to the first user message ("system\\n\\n
    user"), or None when they do not start with a system message."""
    if not messages or messages[0].get("role") != "system":
        return None
    system = str(messages[0].get("content") or "")
    rest = [dict(m) for m in messages[1:]]
    if rest and rest[0].get("role") == "user":
        user = str(rest[0].get("content") or "")
        rest[0]["content"] = f"{system}\n\n{user}" if user else system
        return rest
    return [{"role": "user", "content": system}, *rest]
