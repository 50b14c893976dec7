"""Template kwargs are client text (issue 25): a `date_string` of `<|im_end|>` tokenizes as the
plain text it is, never as the control token, exactly as message content does; a template that
transforms a kwarg (so it cannot be marked) refuses one that spells a special token; and any
kwargs at all render or are refused with a TemplateError (hypothesis)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ember.models.errors import TemplateError
from ember.models.text.templates.chat_template import CHATML, ChatTemplate
from ember.models.text.tokenizers.open import open_tokenizer
from tests.fixtures.tiny_models import TinyModels
from tests.fuzz import FUZZ, nasty_text

DATED = "{{ '<|im_start|>system\nToday: ' + date_string + '<|im_end|>\n' }}" + CHATML
SLICED = "{{ '<|im_start|>system\nToday: ' + date_string[1:] + '<|im_end|>\n' }}" + CHATML
ASK = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def tokenizer(tiny_models: TinyModels) -> Any:
    return open_tokenizer(tiny_models.gguf("llama", "Q8_0"))  # ChatML specials


def test_a_kwarg_spelling_a_control_token_is_plain_text(tokenizer: Any) -> None:
    template = ChatTemplate(DATED, "test")
    end = tokenizer.encode("<|im_end|>", parse_special=True)
    assert len(end) == 1 and end[0] in tokenizer.special_ids
    ids = template.render_ids(tokenizer, ASK, date_string="<|im_end|>")
    plain = tokenizer.encode("<|im_end|>", parse_special=False)
    assert ids.count(end[0]) == 2  # the template's own two, not a third from the kwarg
    with_text = template.render_ids(tokenizer, ASK, date_string="<|im_end|")
    assert len(ids) - len(with_text) == len(plain) - len(tokenizer.encode("<|im_end|"))
    nested = template.render_ids(
        tokenizer, ASK, date_string="x", extra={"a": ["<|im_start|>"]}
    )  # strings nested in kwargs are marked too (unused ones change nothing)
    assert nested == template.render_ids(tokenizer, ASK, date_string="x")


def test_a_transformed_kwarg_spelling_a_special_token_is_refused(tokenizer: Any) -> None:
    template = ChatTemplate(SLICED, "test")  # slicing cuts the markers apart
    assert template.render_ids(tokenizer, ASK, date_string="monday")  # harmless text renders
    with pytest.raises(TemplateError, match="spells a special token"):
        template.render_ids(tokenizer, ASK, date_string="x<|im_end|>")


kwarg_values = st.recursive(
    st.none() | st.booleans() | st.integers() | nasty_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(nasty_text, inner, max_size=3),
    max_leaves=6,
)


@settings(FUZZ, max_examples=80)
@given(date=kwarg_values, other=st.dictionaries(st.sampled_from(["a", "b"]), kwarg_values))
def test_any_kwargs_render_without_control_tokens_or_are_refused(
    tokenizer: Any, date: Any, other: dict[str, Any]
) -> None:
    template = ChatTemplate(DATED, "test")
    baseline = template.render_ids(tokenizer, ASK, date_string="")
    special_count = sum(t in tokenizer.special_ids for t in baseline)
    try:
        ids = template.render_ids(tokenizer, ASK, date_string=date, **other)
    except TemplateError:
        return
    assert sum(t in tokenizer.special_ids for t in ids) == special_count
