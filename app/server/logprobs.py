"""Log-probabilities in OpenAI's two shapes, whole or spread over streamed chunks.

The engine reports one TokenLogprob per reply token (engine/api.py: the model's raw log-softmax,
before penalties, masks and temperature); this file only shapes them:
- chat: `{"content": [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}]}`;
- legacy completions: `{tokens, token_logprobs, top_logprobs: [{token: logprob}], text_offset}`,
  where each top_logprobs dict also holds the sampled token (OpenAI: up to logprobs + 1 keys);
- Ollama: the chat entries as a bare list, the response's (or NDJSON line's) `logprobs`.
A token's `token` text is its bytes decoded with U+FFFD for a partial UTF-8 character (a
character split over tokens); its `bytes` join into the reply's exact UTF-8.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterable
from typing import Any

from ember.engine.api import TokenLogprob, TopLogprob


def _text(token: bytes) -> str:
    return token.decode("utf-8", errors="replace")


def _top_entry(top: TopLogprob) -> dict[str, Any]:
    return {"token": _text(top.token), "logprob": top.logprob, "bytes": list(top.token)}


def chat_entry(lp: TokenLogprob) -> dict[str, Any]:
    """One element of a chat choice's logprobs.content."""
    return {
        "token": _text(lp.token),
        "logprob": lp.logprob,
        "bytes": list(lp.token),
        "top_logprobs": [_top_entry(t) for t in lp.top],
    }


def chat_block(logprobs: Iterable[TokenLogprob]) -> dict[str, Any]:
    """A chat choice's `logprobs` object."""
    return {"content": [chat_entry(lp) for lp in logprobs], "refusal": None}


class CompletionOffsets:
    """text_offset of each token: characters of the completion before its first byte."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.chars = 0

    def next(self, token: bytes) -> int:
        offset = self.chars
        self.chars += len(self._decoder.decode(token))
        return offset


def completion_block(
    logprobs: Iterable[TokenLogprob], offsets: CompletionOffsets
) -> dict[str, Any]:
    """A legacy completion choice's `logprobs` object (offsets carries on across chunks)."""
    block: dict[str, list[Any]] = {
        "tokens": [],
        "token_logprobs": [],
        "top_logprobs": [],
        "text_offset": [],
    }
    for lp in logprobs:
        block["tokens"].append(_text(lp.token))
        block["token_logprobs"].append(lp.logprob)
        top = {_text(t.token): t.logprob for t in reversed(lp.top)}  # most likely wins a clash
        top.setdefault(_text(lp.token), lp.logprob)
        block["top_logprobs"].append(dict(sorted(top.items(), key=lambda kv: -kv[1])))
        block["text_offset"].append(offsets.next(lp.token))
    return block


class LogprobShaper:
    """A request's logprobs on their way out: pending ones ride on the next chunk."""

    def __init__(self, chat: bool) -> None:
        self.chat = chat
        self.pending: list[TokenLogprob] = []
        self.offsets = CompletionOffsets()

    def add(self, logprobs: Iterable[TokenLogprob]) -> None:
        self.pending.extend(logprobs)

    def take(self) -> dict[str, Any] | None:
        """The pending logprobs as one choice's `logprobs` (None when there are none)."""
        if not self.pending:
            return None
        done, self.pending = self.pending, []
        return chat_block(done) if self.chat else completion_block(done, self.offsets)

    def take_entries(self) -> list[dict[str, Any]]:
        """The pending logprobs as a bare list of chat entries (Ollama's `logprobs`)."""
        done, self.pending = self.pending, []
        return [chat_entry(lp) for lp in done]

    def whole(self, logprobs: Iterable[TokenLogprob]) -> dict[str, Any]:
        """The `logprobs` of a non-streamed choice."""
        return chat_block(logprobs) if self.chat else completion_block(logprobs, self.offsets)

    def attach(self, chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Put the pending logprobs on the first of chunks (the tokens whose text they carry);
        with no chunk they wait for the next one (text held back by the reply splitter)."""
        block = self.take() if chunks else None
        if block is not None:
            chunks[0]["choices"][0]["logprobs"] = block
        return chunks
