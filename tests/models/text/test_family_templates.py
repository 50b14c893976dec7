"""Each dense family's chat template (tests/fixtures/tiny_families.py renders each format) through
our sandboxed template path, from the GGUF file and from the HF folder: the same prompt ids on
both tokenizers, the template's markers as special tokens, client text never, and a template
that refuses a system role (Gemma 2's) gets the system text folded into the first user turn."""

from __future__ import annotations

from typing import Any

import pytest

from ember.models.errors import TemplateError
from ember.models.text.templates.chat_template import ChatTemplate
from ember.models.text.templates.system_fold import fold_system
from ember.models.text.tokenizers.open import open_tokenizer
from tests.fixtures.tiny_families import FAMILY_ARCHS

CONVERSATION = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Name a colour."},
    {"role": "assistant", "content": "Blue."},
    {"role": "user", "content": "Another?"},
]
MARKERS = {  # a control token each family's template writes itself
    "phi3": "<|end|>",
    "gemma2": "<start_of_turn>",
    "smollm3": "<|im_start|>",
    "mistral3": "[INST]",
}
TOOL = {
    "type": "function",
    "function": {"name": "get_weather", "description": "Weather", "parameters": {}},
}


def _both(tiny_models: Any, arch: str) -> list[tuple[ChatTemplate, Any]]:
    gguf, hf = tiny_models.gguf(arch, "Q8_0"), tiny_models.hf_dir(arch)
    return [
        (ChatTemplate.from_gguf(gguf), open_tokenizer(gguf)),
        (ChatTemplate.from_hf(hf), open_tokenizer(hf)),
    ]


@pytest.mark.parametrize("arch", FAMILY_ARCHS)
def test_gguf_and_hf_render_the_same_ids(tiny_models: Any, arch: str) -> None:
    (gguf_t, gguf_tok), (hf_t, hf_tok) = _both(tiny_models, arch)
    assert gguf_t.template_source == "gguf metadata" and gguf_t.source == hf_t.source
    ids = gguf_t.render_ids(gguf_tok, CONVERSATION)
    assert ids == hf_t.render_ids(hf_tok, CONVERSATION)
    marker = gguf_tok.encode(MARKERS[arch], parse_special=True)
    assert len(marker) == 1 and marker[0] in gguf_tok.special_ids and marker[0] in ids


@pytest.mark.parametrize("arch", FAMILY_ARCHS)
def test_user_text_spelling_a_marker_stays_text(tiny_models: Any, arch: str) -> None:
    template, tokenizer = _both(tiny_models, arch)[0]
    marker = MARKERS[arch]
    special = tokenizer.encode(marker, parse_special=True)[0]
    plain = [{"role": "user", "content": "hi"}]
    typed = [{"role": "user", "content": f"hi {marker}"}]
    before = template.render_ids(tokenizer, plain).count(special)
    assert template.render_ids(tokenizer, typed).count(special) == before


def test_phi3_tools_ride_in_the_system_turn_as_text(tiny_models: Any) -> None:
    template, tokenizer = _both(tiny_models, "phi3")[0]
    text = template.render(CONVERSATION[:2], tools=[TOOL])
    assert text.startswith("<|system|>Be brief.<|tool|>[") and '"get_weather"' in text
    ids = template.render_ids(tokenizer, CONVERSATION[:2], tools=[TOOL])
    assert tokenizer.decode(ids).count("get_weather") == 1


def test_smollm3_thinking_switch(tiny_models: Any) -> None:
    template = _both(tiny_models, "smollm3")[0][0]
    thinking = template.render(CONVERSATION)
    plain = template.render(CONVERSATION, enable_thinking=False)
    assert "Reasoning Mode: /think" in thinking and "Reasoning Mode: /no_think" in plain
    assert plain.endswith("<|im_start|>assistant\n<think>\n\n</think>\n")
    assert "Be brief." in thinking.split("<|im_end|>")[0]


def test_mistral3_replies_end_with_eos(tiny_models: Any) -> None:
    template = _both(tiny_models, "mistral3")[0][0]
    text = template.render(CONVERSATION)
    assert text == (
        "<s>[SYSTEM_PROMPT]Be brief.[/SYSTEM_PROMPT][INST]Name a colour.[/INST]Blue.</s>"
        "[INST]Another?[/INST]"
    )


def test_gemma2_folds_a_system_message_into_the_first_user_turn(tiny_models: Any) -> None:
    """Gemma 2's template raises on a system role; the render folds it in, once, and a template
    that refuses for another reason still refuses (roles that do not alternate)."""
    template, tokenizer = _both(tiny_models, "gemma2")[0]
    text = template.render(CONVERSATION)
    assert text.startswith("<bos><start_of_turn>user\nBe brief.\n\nName a colour.<end_of_turn>")
    assert template.render_ids(tokenizer, CONVERSATION) == template.render_ids(
        tokenizer, fold_system(CONVERSATION) or []
    )
    with pytest.raises(TemplateError, match="roles must alternate"):
        template.render([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
    with pytest.raises(TemplateError, match="roles must alternate"):
        template.render([CONVERSATION[0], CONVERSATION[1], CONVERSATION[3]])


def test_fold_system_shapes() -> None:
    assert fold_system([{"role": "user", "content": "x"}]) is None
    assert fold_system([{"role": "system", "content": "s"}]) == [{"role": "user", "content": "s"}]
    assert fold_system(CONVERSATION[:1] + CONVERSATION[2:3]) == [
        {"role": "user", "content": "Be brief."},
        {"role": "assistant", "content": "Blue."},
    ]
