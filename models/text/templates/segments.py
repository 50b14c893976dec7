"""Which characters of a rendered chat prompt came from client text, and which from markup.

Each message's content is wrapped in two private-use marker characters and the template rendered
again. If the marked render, with the markers removed, equals the real render exactly and the
markers pair up, the marked spans are content: they are tokenized without special-token parsing.
Templates that `trim` content get a second try with the outer whitespace left outside the
markers; templates that cut assistant content apart (reasoning split off at `</think>`) get a
third with only the non-assistant messages marked. A template that defeats all three is refused:
guessing could turn user text into control tokens.

Tools, tool calls and template kwargs are client text too (client_text.py says which strings):
first every one of them is marked the same way. A template that compares or transforms such a
value (so that marked render differs) gets a render with only the strings that spell a special
token marked (`spells_special`, the tokenizer's answer); if even those cannot be marked, the
request is refused, naming the string. The third strategy leaves assistant content unmarked, so
it is taken only when no assistant content spells a special token.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ember.models.errors import TemplateError
from ember.models.text.templates.client_text import (
    Marking,
    client_strings,
    spelling_special,
    wrap,
)


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


def _marked(messages: Messages, marking: Marking, strategy: int) -> Messages:
    marked = []
    for message in messages:
        message = marking.message_fields(message)
        content = message.get("content")
        skip = strategy == 3 and message.get("role") == "assistant"
        if isinstance(content, str) and not skip:
            wrapped = wrap(content, marking.open_, marking.close, strategy >= 2)
            message = {**message, "content": wrapped}
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


def split_segments(
    render: Callable[[Messages, Kwargs], str],
    messages: Messages,
    kwargs: Kwargs | None = None,
    spells_special: Callable[[str], bool] | None = None,
    max_chars: int = 4 << 20,
) -> list[Segment]:
    """Render messages (with tools and template kwargs) and split the text into template markup
    and client text. spells_special (text -> whether it holds a special token's spelling) comes
    from the tokenizer; without it a template that transforms tools or kwargs is refused."""
    kwargs = kwargs or {}
    expected = render(messages, kwargs)
    values = client_strings(messages, kwargs, max_chars)
    open_, close = _markers(messages, expected, values)
    risky = spelling_special(values, spells_special)
    tries = [(True, risky)]  # every client string marked (with none, the plain render)
    if values:
        tries.append((False, risky))  # only the ones that spell a special token
    if risky:
        tries.append((False, frozenset()))  # none: only to tell which error to give
    # strategy 3 leaves assistant content unmarked: not when it spells a special token
    strategies = (1, 2) if _assistant_spells_special(messages, spells_special) else (1, 2, 3)
    for every_value, marked_strings in tries:
        for strategy in strategies:
            marking = Marking(open_, close, strategy >= 2, every_value, marked_strings)
            try:
                text = render(_marked(messages, marking, strategy), marking.kwargs(kwargs))
            except TemplateError:
                continue  # the template refused a marked value (an id's length, say)
            segments = _parse(text, open_, close)
            if segments is None or "".join(s.text for s in segments) != expected:
                continue
            if not every_value and (spells_special is None or (risky and not marked_strings)):
                raise _unmarkable(risky, spells_special is None)
            return segments
    if len(strategies) == 2:
        raise TemplateError(
            "chat template rewrites assistant messages (reasoning split off), and an assistant "
            "message spells a special token of this model, so it cannot be kept as plain text"
        )
    raise TemplateError(
        "chat template changes message text in a way that cannot be told apart from its markup; "
        "refusing to tokenize it with special tokens enabled"
    )


def _assistant_spells_special(
    messages: Messages, spells_special: Callable[[str], bool] | None
) -> bool:
    texts = [m.get("content") for m in messages if m.get("role") == "assistant"]
    return bool(spelling_special([t for t in texts if isinstance(t, str)], spells_special))


def _unmarkable(risky: frozenset[str], unknown: bool) -> TemplateError:
    """The template uses client strings (tools, tool calls, kwargs) in a way markers cannot
    follow, so they would render as markup: refused when one spells a special token, or
    outright when there is no tokenizer to ask (render_segments alone)."""
    if unknown:
        return TemplateError(
            "chat template: it transforms the text of tools, tool calls or template kwargs, "
            "so that text cannot be kept apart from its markup"
        )
    sample = min(risky, key=len)
    return TemplateError(
        f"chat template: {sample[:60]!r} (in tools, tool calls or template kwargs) spells a "
        "special token of this model, and the template transforms it, so it cannot be kept "
        "as plain text"
    )
