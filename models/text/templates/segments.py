"""Which characters of a rendered chat prompt came from message content, and which from markup.

Each message's content is wrapped in two private-use marker characters and the template rendered
again. If the marked render, with the markers removed, equals the real render exactly and the
markers pair up, the marked spans are content: they are tokenized without special-token parsing.
Templates that `trim` content get a second try with the outer whitespace left outside the
markers; templates that cut assistant content apart (reasoning split off at `</think>`) get a
third with only the non-assistant messages marked. A template that defeats all three is refused:
guessing could turn user text into control tokens.

Template kwargs (`chat_template_kwargs`: a `date_string`, a `reasoning_effort`) are client text
too: every string in them is marked the same way. A template that compares or transforms such
a value (so the marked render differs) renders it unmarked, and the caller's `refuse_unmarked`
check then refuses any of those strings that would tokenize as a special token.
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
Kwargs = dict[str, Any]
# The BMP's private-use area, then planes 15 and 16 (137,468 code points in all).
_PRIVATE_USE = (range(0xE000, 0xF900), range(0xF0000, 0xFFFFE), range(0x100000, 0x10FFFE))


def _markers(messages: Messages, rendered: str, values: list[str]) -> tuple[str, str]:
    """Two private-use characters that neither the messages, the kwargs' strings nor the
    rendered prompt contain."""
    used = set(rendered)
    for message in messages:
        used.update(str(message.get("content", "")))
    for value in values:
        used.update(value)
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


def strings_in(value: Any) -> list[str]:
    """Every string inside a JSON-like value (dict values and list items; keys are names)."""
    out: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict):
            stack += list(item.values())
        elif isinstance(item, list | tuple):
            stack += list(item)
    return out


def _marked_values(value: Any, open_: str, close: str, outside: bool) -> Any:
    if isinstance(value, str):
        return _wrap(value, open_, close, outside)
    if isinstance(value, dict):
        return {k: _marked_values(v, open_, close, outside) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_marked_values(v, open_, close, outside) for v in value]
    return value


def split_segments(
    render: Callable[[Messages, Kwargs], str],
    messages: Messages,
    kwargs: Kwargs | None = None,
    refuse_unmarked: Callable[[list[str]], None] | None = None,
) -> list[Segment]:
    """Render messages (with template kwargs) and split the text into template markup and
    client text (message content and the kwargs' strings)."""
    kwargs = kwargs or {}
    expected = render(messages, kwargs)
    values = strings_in(kwargs)
    open_, close = _markers(messages, expected, values)
    tries = [True, False] if values else [False]
    for mark_values in tries:
        for strategy in (1, 2, 3):
            extra = _marked_values(kwargs, open_, close, strategy >= 2) if mark_values else kwargs
            marked = render(_marked(messages, open_, close, strategy), extra)
            segments = _parse(marked, open_, close)
            if segments is not None and "".join(s.text for s in segments) == expected:
                if values and not mark_values:
                    _refuse_unmarked(values, refuse_unmarked)
                return segments
    raise TemplateError(
        "chat template changes message text in a way that cannot be told apart from its markup; "
        "refusing to tokenize it with special tokens enabled"
    )


def _refuse_unmarked(values: list[str], check: Callable[[list[str]], None] | None) -> None:
    """The template used kwargs' strings in a way markers cannot follow: they render as
    markup, so none of them may spell a special token (check raises); with no tokenizer to
    check against (render_segments alone), such kwargs are refused outright."""
    if check is None:
        raise TemplateError(
            "chat template kwargs: the template transforms their text, so it cannot be kept "
            "apart from its markup"
        )
    check(values)
