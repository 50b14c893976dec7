"""Incremental, UTF-8-safe decoding with stop strings held back until they cannot match.

Each token contributes raw bytes (Tokenizer.token_bytes); an incremental UTF-8 decoder never
emits half a character. Text that could still be the start of a stop string is held back; when
a stop string completes, the text before it is final and generation stops.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass, field

from ember.models.text.tokenizers.base import Tokenizer


def _held_suffix(text: str, stops: tuple[str, ...]) -> int:
    """Length of the longest suffix of text that is a proper prefix of some stop string."""
    best = 0
    for stop in stops:
        for length in range(min(len(stop) - 1, len(text)), best, -1):
            if text.endswith(stop[:length]):
                best = length
                break
    return best


@dataclass
class Detokenizer:
    """Turns generated ids into text deltas; `stopped` once a stop string completes."""

    tokenizer: Tokenizer
    stop: tuple[str, ...] = ()
    lstrip: bool = False  # drop leading whitespace of the reply (a scaffold's "Assistant:" + " x")
    text: str = ""  # decoded text so far (may include a held-back tail)
    emitted: int = 0  # characters of text already handed out
    stripped: int = 0  # leading characters (spaces, tabs: one byte each) lstrip dropped
    stripped_text: str = ""  # those characters
    stopped: bool = False
    matched: str = ""  # the stop string that ended the reply ("" when none did)
    _decoder: codecs.IncrementalDecoder = field(
        default_factory=lambda: codecs.getincrementaldecoder("utf-8")(errors="replace")
    )

    def add(self, token_id: int) -> str:
        """Feed one token; return the text that is now safe to show ("" while held)."""
        if self.stopped:
            return ""
        self.text += self._decoder.decode(self.tokenizer.token_bytes(token_id))
        if self.lstrip and not self.emitted:
            kept = self.text.lstrip(" \t")
            self.stripped += len(self.text) - len(kept)
            self.stripped_text += self.text[: len(self.text) - len(kept)]
            self.text = kept
        return self._release(final=False)

    def flush(self) -> str:
        """End of generation: decode leftover bytes and release any held text."""
        if not self.stopped:
            self.text += self._decoder.decode(b"", final=True)
        return self._release(final=True)

    @property
    def output_text(self) -> str:
        """The visible reply: everything emitted (stop string excluded)."""
        return self.text[: self.emitted]

    def _release(self, *, final: bool) -> str:
        if self.stop and not self.stopped:
            search_from = max(0, self.emitted - max(len(s) for s in self.stop) + 1)
            hits = [(i, s) for s in self.stop if (i := self.text.find(s, search_from)) >= 0]
            if hits:
                self.stopped = True
                at, self.matched = min(hits, key=lambda hit: hit[0])
                self.text = self.text[:at]
                final = True
        if self.stopped:
            final = True
        end = len(self.text) if final else len(self.text) - _held_suffix(self.text, self.stop)
        delta = self.text[self.emitted : end] if end > self.emitted else ""
        self.emitted = max(self.emitted, end)
        return delta
