"""Which generated tokens a text delta completes, and the bytes each adds to the visible reply.

The detokenizer holds text back (half a UTF-8 character, a possible start of a stop string),
strips a reply's leading whitespace (the base-model scaffold) and cuts a stop string off the
end. Token i covers raw bytes [start_i, end_i) of the joined token bytes; the reply shown so far
is raw bytes [stripped, shown). A token leaves the trail in the delta that shows the last of its
bytes (end_i <= shown), or at the end; its reported bytes are its span clipped to what is shown.
At the end, a token that starts at or after the shown end lies wholly in a cut stop string: it
is still counted (token ids) but gets no log-probability. No torch, no numpy.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ember.engine.api import TokenLogprob, TopLogprob
from ember.engine.logprobs import Scored


@dataclass(frozen=True)
class _Pending:
    token_id: int
    start: int  # raw byte offset of the token's first byte
    raw: bytes
    scored: Scored | None
    top: tuple[TopLogprob, ...]

    @property
    def end(self) -> int:
        return self.start + len(self.raw)


@dataclass
class LogprobTrail:
    """Feed every output token (add), then each released text delta (release)."""

    pending: list[_Pending] = field(default_factory=list)
    raw_end: int = 0  # raw bytes of every token added
    shown: int = 0  # raw byte offset the released text reaches (stripped prefix included)

    def add(
        self, token_id: int, raw: bytes, scored: Scored | None, top: tuple[TopLogprob, ...] = ()
    ) -> None:
        """One output token, its bytes, its score (None: logprobs off) and its alternatives."""
        self.pending.append(_Pending(token_id, self.raw_end, raw, scored, top))
        self.raw_end += len(raw)

    def release(
        self, text: str, stripped: int, final: bool
    ) -> tuple[tuple[int, ...], tuple[TokenLogprob, ...]]:
        """The token ids (and their logprobs) a delta of released text completes; stripped:
        leading bytes the reply dropped; final: the last delta (everything goes out)."""
        self.shown = max(self.shown, stripped) + len(text.encode("utf-8"))
        if final:
            done, self.pending = self.pending, []
        else:
            count = next((i for i, p in enumerate(self.pending) if p.end > self.shown), None)
            count = len(self.pending) if count is None else count
            done, self.pending = self.pending[:count], self.pending[count:]
        ids = tuple(p.token_id for p in done)
        logprobs: list[TokenLogprob] = []
        cut = False
        for p in done:
            cut = cut or (final and p.start >= self.shown and bool(p.raw))
            if p.scored is None or cut:
                continue  # logprobs off, or wholly inside the cut stop string (and after it)
            lo, hi = max(p.start, stripped), min(p.end, self.shown)
            shown = p.raw[lo - p.start : hi - p.start] if hi > lo else b""
            logprobs.append(TokenLogprob(p.token_id, shown, p.scored.logprob, p.top))
        return ids, tuple(logprobs)
