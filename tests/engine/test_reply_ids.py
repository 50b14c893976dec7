"""A finished reply's ids as the client saw it (engine/reply_ids.py) and requests that continue
an earlier exchange from its ids (GenerationRequest.context_ids, Ollama's `context`)."""

from __future__ import annotations

import pytest

from ember.engine.api import ChatMessage, GenerationRequest
from ember.engine.errors import EngineError
from ember.engine.reply_ids import visible_reply_ids
from ember.engine.runners.fake import BOS_ID, FakeTokenizer
from tests.engine.helpers import greedy, make_engine, run


class WordTokenizer(FakeTokenizer):
    """The fake byte tokenizer plus multi-byte pieces, so one token can straddle a stop cut."""

    PIECES = {300: b".\nUs", 301: b"er:", 302: b" Hi"}

    def token_bytes(self, token_id: int) -> bytes:
        return self.PIECES.get(token_id) or super().token_bytes(token_id)


def test_an_uncut_reply_keeps_its_generated_ids() -> None:
    tok = FakeTokenizer()
    ids = tok.encode("Paris.")
    assert visible_reply_ids(ids, tok, "Paris.", "") == tuple(ids)
    spaced = tok.encode("  Paris.")  # the leading spaces lstrip hid are the model's own text
    assert visible_reply_ids(spaced, tok, "Paris.", "  ") == tuple(spaced)


def test_a_cut_stop_string_leaves_the_ids() -> None:
    tok = FakeTokenizer()
    ids = tok.encode("ok END")
    assert visible_reply_ids(ids, tok, "ok ", "") == tuple(tok.encode("ok "))


def test_a_token_across_the_cut_is_encoded_afresh() -> None:
    tok = WordTokenizer()
    ids = [302, 300, 301]  # " Hi" ".\nUs" "er:", the stop "\nUser:" cut after " Hi."
    assert visible_reply_ids(ids, tok, "Hi.", " ") == (302, *tok.encode("."))


def test_the_engine_reports_prompt_and_visible_reply_ids() -> None:
    engine = make_engine()
    whole = run(engine, GenerationRequest(prompt="hello", sampling=greedy(12)))
    assert whole.reply_ids == whole.token_ids
    stop = whole.text[5:8]  # the same greedy reply, ended by a stop string in its middle
    request = GenerationRequest(prompt="hello", sampling=greedy(12, stop=(stop,)))
    fin = run(engine, request)
    assert fin.prompt_ids == tuple(engine.encode(request))
    assert fin.text == whole.text[: whole.text.index(stop)]
    assert len(fin.token_ids) > len(fin.reply_ids)  # the stop string's tokens were generated
    assert engine.tokenizer.decode(list(fin.reply_ids)) == fin.text


def test_a_request_continues_from_context_ids_and_hits_the_prefix_cache() -> None:
    engine = make_engine()
    first = run(engine, GenerationRequest(prompt="a" * 40, sampling=greedy(24)))
    context = (*first.prompt_ids, *first.reply_ids)
    follow = GenerationRequest(prompt="b" * 8, sampling=greedy(4), context_ids=context)
    ids = engine.encode(follow)
    assert ids == [*context, *engine.tokenizer.encode("b" * 8)]  # the prompt's BOS dropped
    second = run(engine, follow)
    assert second.stats.prompt_tokens == len(context) + 8
    # every full block of the first exchange that reached the cache is read, not recomputed
    assert second.stats.cached_tokens >= (len(context) - 1) // 16 * 16 > 0


def test_chat_requests_continue_too() -> None:
    engine = make_engine()
    turn = (ChatMessage("user", "hi"),)
    alone = engine.encode(GenerationRequest(messages=turn))
    assert alone[0] == BOS_ID
    ids = engine.encode(GenerationRequest(messages=turn, context_ids=(BOS_ID, 10, 11)))
    assert ids == [BOS_ID, 10, 11, *alone[1:]]


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"prompt": "x", "context_ids": (1, -2)}, "integers >= 0"),
        ({"prompt": "x", "context_ids": (True,)}, "integers >= 0"),
        ({"prompt": "x", "suffix": "y", "context_ids": (1,)}, "fill-in-the-middle"),
    ],
)
def test_bad_context_ids_are_refused(fields: dict, reason: str) -> None:
    with pytest.raises(EngineError, match=reason):
        GenerationRequest(**fields)


def test_context_ids_outside_the_vocabulary_are_refused_naming_them() -> None:
    engine = make_engine()
    big = engine.prompts.vocab_size
    with pytest.raises(EngineError, match=f"context_ids: {big} is outside the vocabulary"):
        engine.encode(GenerationRequest(prompt="x", context_ids=(1, big)))
