"""DRY ("don't repeat yourself"): a penalty on tokens that would extend a repeat of the context.

The scheme of p-e-w (text-generation-webui), as koboldcpp and llama.cpp define it. For the
window w[0..N-1] of the last `dry_penalty_last_n` tokens (-1 = all of them):

1. rep_limit: the number of tokens after the most recent sequence breaker in w (a breaker is a
   string such as "\\n" or ":"; a repeat never reaches back across one). A breaker occurrence is
   a token whose text contains the breaker ("head" with an empty tail), or a token whose text
   ends with a proper prefix of it followed by the tokens of the rest ("head" + "tail").
2. For every earlier position j < N-1, n_j = the length of the longest common suffix of w[..j]
   and w (how many of the last tokens also end at j), capped at rep_limit.
3. A token t that followed such a match, t = w[j+1] with n_j >= allowed_length, would extend
   the repeat: its length L(t) = max n_j over those j.
4. logit[t] -= multiplier * base ** (L(t) - allowed_length) (exponent clamped so the penalty
   stays a finite float32), for every such t that is not a single-token breaker itself.

llama.cpp finds the n_j with a reverse Z-algorithm in C. Here the same numbers come from
numpy: start from every j whose token equals the last one and extend all matches one token per
step, dropping those that stop. Steps are bounded by the longest match (capped where the
clamped exponent makes longer matches irrelevant), so text without long repeats costs a few
array operations per token (benchmarks/bench_dry.py measures it on the starter's 262k vocab).
"""

from __future__ import annotations

import math
import threading
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Sequence as Seq

    from ember.engine.api import SamplingParams
    from ember.models.text.tokenizers.base import Tokenizer

FLOAT32_MAX_LOG = 88.7228391  # log(float32 max): base ** exponent must stay below it
MAX_TAIL_TOKENS = 20  # longest tail kept per breaker head (llama.cpp's bound too)


@dataclass(frozen=True)
class DryBreakers:
    """Sequence breakers compiled for one vocabulary."""

    single: np.ndarray  # (vocab,) bool: the token's text contains a whole breaker
    tails: dict[int, tuple[tuple[int, ...], ...]]  # head id -> token tails completing a breaker

    @classmethod
    def none(cls, vocab_size: int) -> DryBreakers:
        return cls(np.zeros(vocab_size, dtype=bool), {})


class Cancelled(Exception):
    """compile_breakers was asked to stop (the engine is closing its tokenizer)."""


def _token_texts(tokenizer: Tokenizer, cancel: threading.Event | None) -> list[str]:
    texts = []
    for i in range(tokenizer.vocab_size):
        if cancel is not None and not i % 4096 and cancel.is_set():
            raise Cancelled
        texts.append(tokenizer.token_bytes(i).decode("utf-8", errors="replace"))
    return texts


def compile_breakers(
    tokenizer: Tokenizer, breakers: tuple[str, ...], cancel: threading.Event | None = None
) -> DryBreakers:
    """Heads and tails of every breaker over the tokenizer's vocabulary (one pass per breaker).

    Reading every token's text is the cost (6.6 s for the starter's 262k tokens on a busy
    2-core machine: benchmarks/bench_dry.py), so Engine.load starts it in the background.
    """
    texts = _token_texts(tokenizer, cancel)
    single = np.zeros(len(texts), dtype=bool)
    tails: dict[int, set[tuple[int, ...]]] = {}
    for breaker in breakers:
        prefixes = [breaker[:k] for k in range(1, len(breaker))]
        for token_id, text in enumerate(texts):
            if breaker in text:
                single[token_id] = True
                continue
            for prefix in prefixes:  # the token's text ends with the breaker's first chars
                if text.endswith(prefix):
                    rest = tokenizer.encode(breaker[len(prefix) :])[:MAX_TAIL_TOKENS]
                    tails.setdefault(token_id, set()).add(tuple(rest))
    return DryBreakers(single, {k: tuple(sorted(v)) for k, v in tails.items()})


_cache: weakref.WeakKeyDictionary[object, dict[tuple[str, ...], DryBreakers]] = (
    weakref.WeakKeyDictionary()
)
_cache_lock = threading.Lock()


def breakers_for(
    tokenizer: Tokenizer, breakers: tuple[str, ...], cancel: threading.Event | None = None
) -> DryBreakers:
    """compile_breakers, computed once per tokenizer and breaker set (raises Cancelled)."""
    with _cache_lock:
        per_tokenizer = _cache.setdefault(tokenizer, {})
        if breakers not in per_tokenizer:
            per_tokenizer[breakers] = compile_breakers(tokenizer, breakers, cancel)
        return per_tokenizer[breakers]


class BreakerPrecompile:
    """Compiles the default breakers on a daemon thread while the user types the first message;
    stop() cancels it and waits, so the tokenizer is never used after the runner frees it."""

    def __init__(self, tokenizer: Tokenizer, breakers: tuple[str, ...]) -> None:
        self._cancel = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(tokenizer, breakers), name="ember-dry-breakers", daemon=True
        )
        self._thread.start()

    def _run(self, tokenizer: Tokenizer, breakers: tuple[str, ...]) -> None:
        try:
            breakers_for(tokenizer, breakers, self._cancel)
        except Cancelled:
            pass

    def stop(self) -> None:
        self._cancel.set()
        self._thread.join()


def _rep_limit(window: np.ndarray, breakers: DryBreakers) -> int:
    """Tokens after the most recent breaker occurrence (all of the window if none)."""
    n = window.shape[0]
    ids = np.clip(window, 0, breakers.single.shape[0] - 1)
    heads = breakers.single[ids]
    if breakers.tails:
        multi = np.fromiter((int(t) in breakers.tails for t in window), dtype=bool, count=n)
        heads = heads | multi
    for pos in np.flatnonzero(heads)[::-1]:  # most recent first
        i = n - 1 - int(pos)  # distance from the end: 0 = the last token
        longest = 0 if breakers.single[ids[pos]] else -1  # a whole breaker: empty tail
        for tail in breakers.tails.get(int(window[pos]), ()):
            k = len(tail)
            if longest < k <= i and tuple(window[pos + 1 : pos + 1 + k]) == tail:
                longest = k
        if longest >= 0:
            return i - longest
    return n


def match_lengths(window: np.ndarray, cap: int) -> tuple[np.ndarray, np.ndarray]:
    """(j, n_j) for every j < N-1 with n_j >= 1: the longest common suffix of window[..j] and
    window, at most cap. Equal to the reverse Z-algorithm's repeat counts."""
    n = window.shape[0]
    active = np.flatnonzero(window[:-1] == window[-1])
    done_j: list[np.ndarray] = []
    done_len: list[np.ndarray] = []
    length = 1
    while active.size and length < cap:
        # extend by one: compare window[j - length] with window[n - 1 - length]
        ok = active >= length
        ok[ok] = window[active[ok] - length] == window[n - 1 - length]
        done_j.append(active[~ok])
        done_len.append(np.full(int((~ok).sum()), length))
        active = active[ok]
        length += 1
    done_j.append(active)
    done_len.append(np.full(active.size, min(length, cap)))
    return np.concatenate(done_j), np.concatenate(done_len)


def dry_penalties(
    history: Seq[int], params: SamplingParams, breakers: DryBreakers
) -> tuple[np.ndarray, np.ndarray]:
    """(token ids, logit penalties) DRY subtracts after this history; empty when inactive."""
    empty = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32))
    last_n = params.dry_penalty_last_n
    if params.dry_multiplier == 0.0 or params.dry_base < 1.0 or last_n == 0:
        return empty
    window = np.asarray(history[-last_n:] if last_n > 0 else history, dtype=np.int64)
    allowed = params.dry_allowed_length
    if window.shape[0] <= allowed:
        return empty
    rep_limit = _rep_limit(window, breakers)
    if rep_limit < allowed:
        return empty
    max_exponent = 0  # no clamp needed for a base this close to 1
    if params.dry_base > 1.000001:
        max_exponent = int(FLOAT32_MAX_LOG / math.log(params.dry_base))
    cap = min(rep_limit, allowed + max_exponent) if max_exponent else rep_limit
    js, lengths = match_lengths(window, max(cap, 1))
    keep = lengths >= allowed
    if not keep.any():
        return empty
    tokens, lengths = window[js[keep] + 1], lengths[keep]
    # the longest repeat each token would extend: sort by (token, length), keep each token's last
    order = np.lexsort((lengths, tokens))
    tokens, lengths = tokens[order], lengths[order]
    last = np.append(tokens[1:] != tokens[:-1], True)
    tokens, lengths = tokens[last], lengths[last]
    in_vocab = (tokens >= 0) & (tokens < breakers.single.shape[0])
    tokens, lengths = tokens[in_vocab], lengths[in_vocab]
    not_breaker = ~breakers.single[tokens]
    tokens, lengths = tokens[not_breaker], lengths[not_breaker]
    exponent = lengths - allowed
    if max_exponent:
        exponent = np.minimum(exponent, max_exponent)
    penalties = params.dry_multiplier * np.power(params.dry_base, exponent.astype(np.float64))
    return tokens, penalties.astype(np.float32)
