"""Ollama's answer to a prompt past the context: truncate it, and say so in the log (Ollama
logs "truncating input prompt"). A `context` (ollama_context.py) loses its oldest ids first,
keeping its first (the BOS that began the exchange); then a chat drops its oldest messages,
keeping the system prompt and the latest message; a raw prompt keeps its end. The OpenAI routes refuse instead
(context_fit.py). The prompt is counted on the engine's thread; the cut is found by bisection,
so a long history costs a few counts, not one per message."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ember.engine.api import Backend, GenerationRequest

log = logging.getLogger(__name__)


def _fewest_cut(most: int, fits: Callable[[int], bool]) -> int:
    """The smallest cut in 0..most for which fits(cut) holds (fits is monotonic); most if
    none does."""
    low, high = 0, most
    while low < high:
        middle = (low + high) // 2
        if fits(middle):
            high = middle
        else:
            low = middle + 1
    return low


def _cut_request(gen: GenerationRequest, cut: int) -> GenerationRequest:
    """gen less its `cut` oldest messages (system messages kept, the latest always kept), or
    less the first `cut` characters / token ids of its raw prompt."""
    if gen.messages is not None:
        system = [m for m in gen.messages if m.role == "system"]
        rest = [m for m in gen.messages if m.role != "system"]
        return replace(gen, messages=(*system, *rest[cut:]))
    if gen.prompt_ids is not None:
        return replace(gen, prompt_ids=gen.prompt_ids[cut:])
    assert gen.prompt is not None
    return replace(gen, prompt=gen.prompt[cut:])


def _most_cut(gen: GenerationRequest) -> int:
    if gen.messages is not None:
        return max(0, sum(m.role != "system" for m in gen.messages) - 1)
    if gen.prompt_ids is not None:
        return max(0, len(gen.prompt_ids) - 1)
    return max(0, len(gen.prompt or "") - 1)


def _cut_context(
    backend: Backend, gen: GenerationRequest, before: int, limit: int
) -> GenerationRequest:
    """gen less the fewest oldest context ids (after the first) that make it fit."""
    first, rest = gen.context_ids[:1], gen.context_ids[1:]

    def cut(n: int) -> GenerationRequest:
        return replace(gen, context_ids=first + rest[n:])

    dropped = _fewest_cut(len(rest), lambda n: backend.count_tokens(cut(n)) < limit)
    log.warning(
        "truncating input prompt: %d tokens past the context of %d; dropped %d context ids",
        before, limit, dropped,
    )  # fmt: skip
    return cut(dropped)


def truncate_to_fit(backend: Backend, gen: GenerationRequest) -> GenerationRequest:
    """gen, or gen cut so its prompt leaves room for a reply in the context (blocking: call it
    in a worker thread). A prompt with a suffix (fill-in-the-middle) is left whole."""
    limit = backend.info.context_limit
    if limit <= 0 or gen.suffix is not None:
        return gen
    before = backend.count_tokens(gen)
    if before < limit:
        return gen
    if gen.context_ids:
        gen = _cut_context(backend, gen, before, limit)
        if not gen.context_ids[1:] and backend.count_tokens(gen) >= limit:
            gen = replace(gen, context_ids=())  # the prompt alone is past the context
        else:
            return gen
    most = _most_cut(gen)
    cut = _fewest_cut(most, lambda n: backend.count_tokens(_cut_request(gen, n)) < limit)
    kept = _cut_request(gen, cut)
    unit = "messages" if gen.messages is not None else "leading characters"
    unit = "leading tokens" if gen.prompt_ids is not None else unit
    log.warning(
        "truncating input prompt: %d tokens past the context of %d; dropped %d %s, %d left",
        before, limit, cut, unit, backend.count_tokens(kept),
    )  # fmt: skip
    return kept
