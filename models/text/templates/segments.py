"""Which characters of a rendered chat prompt came from message content, and which from markup.

Each message's content is wrapped in two private-use marker characters and the template rendered
again. If the marked render, with the markers removed, equals the real render exactly and the
markers pair up, the marked spans are content: they are tokenized without special-token parsing.
Templates that `trim` content get a second try with the outer whitespace left outside the
markers; templates that cut assistant content apart (reasoning split off at `</think>`) get a
third with only the non-assistant messages marked. A template that defeats all three is refused:
guessing could turn user text into control tokens.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ember.models.errors import TemplateError


@dataclass(frozen=True)
class Segment:
    """A piece of rendered text: template markup (special tokens allowed) or message content."""

    text: str
    from_template: bool


Messages = list[dict[str, Any]]
# The BMP's private-use area, then planes 15 and 16 (137,468 code points in all).
_PRIVATE_USE = (range(0xE000, 0xF900), range(0xF0000, 0xFFFFE), range(0x100000, 0x10FFFE))


def _markers(messages: Messages, rendered: str) -> tuple[str, str]:
    """Two private-use characters that neither the messages nor the rendered prompt contain."""
    used = set(rendered)
    for message in messages:
        used.update(str(message.get("content", "")))
    free = (chr(c) for block in _PRIVATE_USE for c in block if chr(c) not in used)
    pair = next(free, None), next(free, None)
    if pair[0] is None or pair[1] is None:
        raise TemplateError(
            "messages use every private-use character; no marker is left to tell message text "
            "from chat template markup"
        )
    return pair[0], pair[1]


def _wrap(text: str, open_: str, close: str, keep_whitespace_outside: bool) -> str:
    if not keep_whitespace_outside:
        return f"{open_}{text}{close}"
    core = text.strip()
    if not core:
        return text
    start = text.index(core)
    return f"{text[:start]}{open_}{core}{close}{text[start + len(core) :]}"


def _marked(messages: Messages, open_: str, close: str, strategy: int) -> Messages:
    marked = []
    for message in messages:
        content = message.get("content")
        skip = strategy == 3 and message.get("role") == "assistant"
        if isinstance(content, str) and not skip:
            message = {**message, "content": _wrap(content, open_, close, strategy >= 2)}
        marked.append(message)
    return marked


def _parse(marked_text: str, open_: str, close: str) -> list[Segment] | None:
    """Split on the markers; None when they do not pair up."""
    segments: list[Segment] = []
    inside = False
    current: list[str] = []
    for char in marked_text:
        if char in (open_, close):
            if (char == open_) == inside:
                return None  # nested or unbalanced
            segments.append(Segment("".join(current), from_template=not inside))
            current, inside = [], not inside
        else:
            current.append(char)
    if inside:
        return None
    segments.append(Segment("".join(current), from_template=True))
    return _merge(segments)


def _merge(segments: list[Segment]) -> list[Segment]:
    merged: list[Segment] = []
    for segment in segments:
        if not segment.text:
            continue
        if merged and merged[-1].from_template == segment.from_template:
            merged[-1] = Segment(merged[-1].text + segment.text, segment.from_template)
        else:
            merged.append(segment)
    return merged


def split_segments(render: Callable[[Messages], str], messages: Messages) -> list[Segment]:
    """Render messages and split the text into template markup and message content."""
    expected = render(messages)
    open_, close = _markers(messages, expected)
    for strategy in (1, 2, 3):
        segments = _parse(render(_marked(messages, open_, close, strategy)), open_, close)
        if segments is not None and "".join(s.text for s in segments) == expected:
            return segments
    raise TemplateError(
        "chat template changes message text in a way that cannot be told apart from its markup; "
        "refusing to tokenize it with special tokens enabled"
    )
