"""Fuzz: the boundary text policy never raises and never lets a surrogate or a control through."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ember.text import clean, decode, escape, has_controls, visible
from tests.fuzz import FUZZ, nasty_text


@FUZZ
@given(st.binary(max_size=200))
def test_any_bytes_decode_to_clean_text(data: bytes) -> None:
    decoded = decode(data)
    assert clean(decoded.text) == decoded.text  # no surrogates
    decoded.text.encode("utf-8")  # always encodable
    assert decoded.num_replaced >= 0


@FUZZ
@given(st.one_of(nasty_text, st.text()))
def test_escape_is_one_inert_line_and_idempotent_on_clean_text(text: str) -> None:
    out = escape(text)
    assert not has_controls(out) and "\n" not in out
    out.encode("utf-8")
    assert escape(out) == out
    assert clean(clean(text)) == clean(text)


@FUZZ
@given(st.one_of(nasty_text, st.text()))
def test_visible_keeps_lines_but_no_escape_sequences(text: str) -> None:
    out = visible(text)
    assert "\x1b" not in out and "\r" not in out and "\u202e" not in out
    assert out.count("\n") == clean(text).replace("\r\n", "\n").count("\n")
