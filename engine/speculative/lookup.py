"""Prompt lookup: draft the tokens that followed the latest earlier occurrence of the context's
last n tokens (n from max_ngram down to min_ngram). No model: the guesses cost a dict lookup.

It wins when the reply copies from its input (edit this code, repeat or summarize that text,
answer with quotes) and costs little otherwise: drafts are point masses, so verification is
exact for any sampling settings, and the adaptive length turns drafting off when it misses.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ember.engine.errors import EngineError
from ember.engine.sequence import Sequence
from ember.engine.speculative.adaptive import AdaptiveDraftLength


@dataclass
class NgramIndex:
    """For each n-gram of one token list: the index of the token after its latest occurrence."""

    min_ngram: int
    max_ngram: int
    next_index: dict[tuple[int, ...], int] = field(default_factory=dict)
    num_indexed: int = 0  # token positions whose preceding n-grams are in next_index

    def update(self, token_ids: list[int]) -> None:
        """Index the n-grams ending before each new position that has a known next token."""
        # an n-gram ending just before position i (tokens[i-n:i]) maps to i: "what came next"
        for i in range(max(self.num_indexed, 1), len(token_ids)):
            for n in range(self.min_ngram, min(self.max_ngram, i) + 1):
                self.next_index[tuple(token_ids[i - n : i])] = i
        self.num_indexed = max(self.num_indexed, len(token_ids))

    def lookup(self, token_ids: list[int], max_tokens: int) -> list[int]:
        """The continuation of the longest suffix n-gram seen before (at most max_tokens)."""
        end = len(token_ids)
        for n in range(min(self.max_ngram, end), self.min_ngram - 1, -1):
            start = self.next_index.get(tuple(token_ids[end - n :]))
            if start is not None and start < end:
                return token_ids[start : start + max_tokens]
        return []


class PromptLookupProposer:
    """Proposer that drafts by n-gram matches in the sequence's own tokens (prompt + output)."""

    def __init__(
        self,
        *,
        min_ngram: int = 2,
        max_ngram: int = 4,
        adaptive: AdaptiveDraftLength | None = None,
    ) -> None:
        if not 1 <= min_ngram <= max_ngram:
            raise EngineError(
                f"prompt lookup n-grams {min_ngram}..{max_ngram}: need 1 <= min <= max"
            )
        self.min_ngram, self.max_ngram = min_ngram, max_ngram
        self.adaptive = adaptive
        if adaptive is not None:
            adaptive.free_guesses = True
        self._indexes: dict[int, tuple[Sequence, NgramIndex]] = {}

    def propose(self, seq: Sequence, max_tokens: int) -> list[int]:
        """Up to max_tokens guesses for the tokens after seq.token_ids."""
        self._sweep()
        k = self.adaptive.begin(seq, max_tokens) if self.adaptive else max_tokens
        entry = self._indexes.get(seq.seq_id)
        if entry is None:
            entry = (seq, NgramIndex(self.min_ngram, self.max_ngram))
            self._indexes[seq.seq_id] = entry
        index = entry[1]
        index.update(seq.token_ids)
        guesses = index.lookup(seq.token_ids, max(k, 1) if self.adaptive else k)
        drafts = guesses[:k]
        if self.adaptive is not None:
            self.adaptive.record(seq, guesses, len(drafts))
        return drafts

    def _sweep(self) -> None:
        for seq_id, (seq, _) in list(self._indexes.items()):
            if seq.is_finished:
                del self._indexes[seq_id]
                if self.adaptive is not None:
                    self.adaptive.forget(seq_id)
