"""Message text made of private-use characters (the segmenter's markers) still splits cleanly."""

from __future__ import annotations

import pytest

from ember.models.errors import TemplateError
from ember.models.text.templates.chat_template import ChatTemplate
from ember.models.text.templates.segments import _PRIVATE_USE

BMP_PRIVATE_USE = "".join(chr(c) for c in _PRIVATE_USE[0])


def _content_of(segments: list) -> str:
    return "".join(s.text for s in segments if not s.from_template)


def test_content_of_every_bmp_private_use_character_is_kept_as_content() -> None:
    template = ChatTemplate.for_architecture("qwen2")
    messages = [{"role": "user", "content": BMP_PRIVATE_USE}]
    segments = template.render_segments(messages)
    assert _content_of(segments) == BMP_PRIVATE_USE
    assert "".join(s.text for s in segments) == template.render(messages)


def test_markup_using_private_use_characters_does_not_confuse_the_markers() -> None:
    source = "{% for m in messages %}\ue000{{ m['content'] }}\ue001{% endfor %}"
    template = ChatTemplate(source, "test")
    segments = template.render_segments([{"role": "user", "content": "hi"}])
    assert [(s.text, s.from_template) for s in segments] == [
        ("\ue000", True),
        ("hi", False),
        ("\ue001", True),
    ]


def test_text_using_every_private_use_character_is_a_template_error() -> None:
    everything = "".join(chr(c) for block in _PRIVATE_USE for c in block)
    template = ChatTemplate.for_architecture("qwen2")
    with pytest.raises(TemplateError, match="every private-use character"):
        template.render_segments([{"role": "user", "content": everything}])
