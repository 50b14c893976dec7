"""Toasts that read well: the subject once (as the title), the reason once (as the message)."""

from __future__ import annotations

from textual.dom import DOMNode


def without_subject(message: str, subject: str) -> str:
    """message without a leading `X: ` when X is already in the subject: errors from the lower
    layers name their subject too (`search: offline mode is on` under the title `Hub search`)."""
    head, sep, rest = message.partition(": ")
    if sep and rest and head.strip() and head.strip().lower() in subject.lower():
        return rest
    return message


def notify_error(node: DOMNode, subject: str, error: Exception | str, timeout: float = 8) -> None:
    """An error toast titled `subject` (thread-safe, like every notify)."""
    message = without_subject(str(error).strip().splitlines()[0] if str(error) else "", subject)
    node.app.notify(
        message or subject, title=subject, severity="error", markup=False, timeout=timeout
    )
