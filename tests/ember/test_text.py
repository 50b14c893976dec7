"""The one decoding policy in and the one escaping policy out (ember/text.py)."""

from __future__ import annotations

import codecs

import pytest

from ember.text import clean, decode, describe, escape, visible


def test_clean_replaces_lone_surrogates_and_joins_pairs() -> None:
    assert clean("caf\udce9") == "caf\ufffd"
    assert clean("\ud83d\ude00 ok \ud800") == "\U0001f600 ok \ufffd"
    assert clean("plain ascii") == "plain ascii"
    assert clean("héllo") == "héllo"


@pytest.mark.parametrize(
    ("data", "text", "encoding", "replaced"),
    [
        (b"caf\xc3\xa9", "café", "utf-8", 0),
        (b"caf\xe9!", "caf\ufffd!", "utf-8", 1),
        (b"\x80\xff", "\ufffd\ufffd", "utf-8", 2),
        (codecs.BOM_UTF8 + "é".encode(), "é", "utf-8", 0),
        ("héllo".encode("utf-16"), "héllo", "utf-16-le", 0),
        ("héllo".encode("utf-16-be").join([codecs.BOM_UTF16_BE, b""]), "héllo", "utf-16-be", 0),
        ("héllo".encode("utf-32"), "héllo", "utf-32-le", 0),
        ("\ufffd already".encode(), "\ufffd already", "utf-8", 0),
    ],
)
def test_decode_policy(data: bytes, text: str, encoding: str, replaced: int) -> None:
    decoded = decode(data)
    assert (decoded.text, decoded.encoding, decoded.num_replaced) == (text, encoding, replaced)


def test_decode_warning_names_the_source() -> None:
    assert decode(b"ok").warning("stdin") == ""
    assert decode(b"\xe9").warning("stdin") == (
        "stdin: 1 invalid UTF-8 sequence(s) replaced with U+FFFD"
    )


def test_escape_makes_one_inert_line() -> None:
    fake = "model.gguf\n\x1b[31member: error: pwned\x1b[0m\r\t\u202egnp.exe"
    out = escape(fake)
    assert "\n" not in out and "\x1b" not in out and "\r" not in out and "\u202e" not in out
    assert out == "model.gguf\\n\\x1b[31member: error: pwned\\x1b[0m\\r\\t\\u202egnp.exe"
    assert escape("C:\\models\\ok é 日本") == "C:\\models\\ok é 日本"
    assert escape("\x9b\x7f\udce9") == "\\x9b\\x7f\ufffd"


def test_visible_keeps_lines_and_pictures_controls() -> None:
    assert visible("a\r\nb\tc\x1b[2J\x07") == "a\nb\tc\u241b[2J\u2407"
    assert visible("\x7f\x85\u2066") == "\u2421\\x85\\u2066"


def test_describe_is_one_line() -> None:
    assert describe(ValueError("two\nlines  here")) == "ValueError: two lines here"
    assert describe(StopIteration()) == "StopIteration"
    assert "\x1b" not in describe(RuntimeError("\x1b[2J"))
