"""ReasoningBudget: at most N tokens inside the reply's <think> ... </think> block.

The engine counts the tokens sampled while the reply is inside a reasoning block (the markers
of the model's reply format, models/text/reasoning_markers.py: `<think>` tags, or harmony's
analysis message for gpt-oss); once N are spent it forces the tokenizer's spelling of the
format's close (`</think>`; `<|end|><|start|>assistant<|channel|>final<|message|>`), one token
per step, so the model goes on to its answer.
Forcing is a mask (every other logit at -inf) applied where the constraint's mask is, so a
drafted token is verified against the forced row and speculative decoding stays exact.

Markers are found in the tokens' bytes, so a model that writes `<think>` as one special token
(Qwen3, DeepSeek-R1) and one that spells it in pieces are both counted. A prompt that ends
inside an open block (templates that open it themselves) starts the count at once. A reply
with no reasoning block never meets a marker: the budget costs nothing and changes nothing.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ember.models.text.reasoning_markers import THINK, ReasoningMarkers
from ember.models.text.tokenizers.base import Tokenizer

PROMPT_LOOKBACK = 16  # prompt tokens searched for a block the template left open


@dataclass
class ReasoningBudget:
    """One request's count of reasoning tokens and the forced close once budget_tokens pass."""

    budget_tokens: int
    close_ids: tuple[int, ...]  # the tokenizer's ids for the forced close ("</think>")
    token_bytes: Callable[[int], bytes]
    open: bytes = THINK.open.encode()
    close: bytes = THINK.close.encode()
    inside: bool = False
    num_reasoning_tokens: int = 0  # sampled inside a block, across blocks (forced ones not)
    num_forced: int = 0  # how many of close_ids have been forced so far
    tail: bytes = b""  # the last bytes seen, for a marker split across tokens

    @classmethod
    def create(
        cls,
        tokenizer: Tokenizer,
        budget_tokens: int,
        prompt_ids: Sequence[int],
        markers: ReasoningMarkers = THINK,
    ) -> ReasoningBudget:
        close_ids = tuple(tokenizer.encode(markers.forced_close, parse_special=True))
        tail = b"".join(tokenizer.token_bytes(i) for i in prompt_ids[-PROMPT_LOOKBACK:])
        open_, close = markers.open.encode(), markers.close.encode()
        inside = tail.rfind(open_) > tail.rfind(close)  # -1 for both: not inside
        return cls(budget_tokens, close_ids, tokenizer.token_bytes, open_, close, inside=inside)

    @property
    def forcing(self) -> bool:
        """The next token must be close_ids[num_forced]."""
        return self.num_forced > 0 or (
            self.inside and self.num_reasoning_tokens >= self.budget_tokens
        )

    def forced_token(self) -> int | None:
        return self.close_ids[self.num_forced] if self.forcing else None

    def advance(self, token: int) -> None:
        """Take one accepted token of the reply."""
        if self.forcing:
            self.num_forced += 1
            if self.num_forced == len(self.close_ids):  # the block is closed
                self.num_forced, self.inside, self.tail = 0, False, b""
            return
        if self.inside:
            self.num_reasoning_tokens += 1
        self.tail += self.token_bytes(token)
        marker = self.close if self.inside else self.open
        at = self.tail.find(marker)
        if at >= 0:
            self.inside = not self.inside
            self.tail = self.tail[at + len(marker) :]
        self.tail = self.tail[
            -max(len(self.open), len(self.close)) :
        ]  # a marker split across tokens

    def mask(self, row: np.ndarray, emitted: list[int]) -> np.ndarray:
        """row (vocab,) for the position after this step's emitted tokens: unchanged, or every
        logit but the forced token's at -inf."""
        ahead = self
        if emitted:
            ahead = copy.copy(self)
            for token in emitted:
                ahead.advance(token)
        forced = ahead.forced_token()
        if forced is None:
            return row
        out = np.full_like(row, -np.inf, dtype=np.float32)
        out[forced] = 0.0
        return out
