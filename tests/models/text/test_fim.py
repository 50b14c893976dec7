"""Fill-in-the-middle: markers found by spelling, the PSM prompt, and the engine's FIM path."""

from __future__ import annotations

import pytest

from ember.engine.api import GenerationRequest
from ember.engine.errors import EngineError
from ember.engine.runners.fake import FakeTokenizer
from ember.models.text.fim import FimTokens, fim_prompt, fim_tokens
from tests.engine.helpers import make_engine

MARKERS = {"<PRE>": 1, "<SUF>": 2, "<MID>": 3}  # CodeLlama's spellings on the fake's special ids


class FimTokenizer(FakeTokenizer):
    """The fake byte tokenizer whose three special ids are spelled as CodeLlama's FIM markers."""

    add_bos = False

    def encode(self, text: str, *, add_bos: bool = False, parse_special: bool = False) -> list[int]:
        if parse_special and text in MARKERS:
            return [MARKERS[text]]
        return super().encode(text, add_bos=add_bos)


def test_markers_by_spelling() -> None:
    assert fim_tokens(FimTokenizer()) == FimTokens(1, 2, 3)
    assert fim_tokens(FakeTokenizer()) is None  # <bos> <eos> <eot>: no FIM markers


def test_prompt_is_prefix_suffix_middle() -> None:
    tok = FimTokenizer()
    ids = fim_prompt(tok, FimTokens(1, 2, 3), "ab", "c<MID>")
    assert ids == [1, *tok.encode("ab"), 2, *tok.encode("c<MID>"), 3]
    assert ids.count(3) == 1  # the user's "<MID>" stays text


def test_engine_builds_the_fim_prompt_or_refuses() -> None:
    engine = make_engine()
    request = GenerationRequest(prompt="def f(", suffix="):\n    pass")
    with pytest.raises(EngineError, match="fill-in-the-middle"):
        engine.encode(request)
    tok = engine.prompts.tokenizer = FimTokenizer()  # what the prompt encoder reads
    assert engine.encode(request) == [1, *tok.encode("def f("), 2, *tok.encode("):\n    pass"), 3]
    with pytest.raises(EngineError, match="suffix"):
        GenerationRequest(messages=(), suffix="x")
