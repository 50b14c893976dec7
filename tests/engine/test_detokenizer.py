from __future__ import annotations

from ember.engine.detokenizer import Detokenizer
from ember.engine.runners.fake import FakeTokenizer


def _feed(detok: Detokenizer, text: str) -> list[str]:
    tok = FakeTokenizer()
    return [detok.add(t) for t in tok.encode(text)]


def test_never_emits_half_a_utf8_character() -> None:
    detok = Detokenizer(FakeTokenizer())
    deltas = _feed(detok, "a€😀b")
    assert deltas == ["a", "", "", "€", "", "", "", "😀", "b"]
    assert detok.flush() == "" and detok.output_text == "a€😀b"


def test_unfinished_character_becomes_replacement_at_flush() -> None:
    detok = Detokenizer(FakeTokenizer())
    detok.add(FakeTokenizer().encode("€")[0])
    assert detok.flush() == "\ufffd"


def test_stop_string_held_back_then_cut() -> None:
    detok = Detokenizer(FakeTokenizer(), stop=("END",))
    deltas = _feed(detok, "ok EN")
    assert "".join(deltas) == "ok "  # "EN" might start END: held
    assert not detok.stopped
    assert detok.add(FakeTokenizer().encode("D")[0]) == ""
    assert detok.stopped and detok.output_text == "ok " and detok.matched == "END"
    assert detok.add(FakeTokenizer().encode("x")[0]) == ""


def test_held_text_released_when_it_cannot_match() -> None:
    detok = Detokenizer(FakeTokenizer(), stop=("END",))
    deltas = _feed(detok, "ENx")
    assert deltas == ["", "", "ENx"]
    detok = Detokenizer(FakeTokenizer(), stop=("END",))
    _feed(detok, "xE")
    assert detok.flush() == "E" and detok.output_text == "xE"


def test_overlapping_stop_strings_pick_earliest() -> None:
    detok = Detokenizer(FakeTokenizer(), stop=("bcd", "abcz", "c"))
    _feed(detok, "xabcd")
    assert detok.stopped and detok.output_text == "xab"
    assert detok.matched == "c"  # the one that ended the reply, for Anthropic's stop_sequence
