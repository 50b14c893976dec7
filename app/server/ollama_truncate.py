"""Ollama's answer to a prompt past the context: truncate it, and say so in the log (Ollama
logs "truncating input prompt"). A `context` (ollama_context.py) loses its oldest ids first,
keeping its first (the BOS that began the exchange); then a chat drops its oldest messages,
keeping the system prompt and the latest message, and if that is not enough, the start of the
latest message (as Ollama's runner keeps a prompt's last tokens); a raw prompt keeps its end.
The OpenAI routes refuse instead (context_fit.py). The prompt is counted on the engine's thread; the cut is found by bisection,
so a long history costs a few counts, not one per message, and a long text's probes start near
the context's size, so they are cheap to count."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from ember.app.server.errors import RequestInvalid

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


def _keep_tail(length: int, fits: Callable[[int], bool], guess: int) -> int:
    """The most trailing units (characters, ids) to keep, in 0..length, for which fits(kept)
    holds (monotonic: keeping more never fits better); 0 if none does. Probes start near guess
    and grow, so each count is of a prompt about the context's size, not of the whole one."""
    high = max(1, min(length, guess))
    while high < length and fits(high):
        high = min(length, high * 2)
    if fits(high):
        return high
    low = 0
    while high - low > 1:
        middle = (low + high) // 2
        if fits(middle):
            low = middle
        else:
            high = middle
    return low


def _cut_messages(gen: GenerationRequest, cut: int) -> GenerationRequest:
    """gen less its `cut` oldest messages (system messages kept, the latest always kept)."""
    assert gen.messages is not None
    system = [m for m in gen.messages if m.role == "system"]
    rest = [m for m in gen.messages if m.role != "system"]
    return replace(gen, messages=(*system, *rest[cut:]))


def _tail_of_latest(gen: GenerationRequest, keep: int) -> GenerationRequest:
    """gen with its latest message's content cut to its last `keep` characters."""
    assert gen.messages is not None
    last = gen.messages[-1]
    content = last.content[len(last.content) - keep :] if keep else ""
    return replace(gen, messages=(*gen.messages[:-1], replace(last, content=content)))


def _tail_of_prompt(gen: GenerationRequest, keep: int) -> GenerationRequest:
    """gen with its raw prompt (text or ids) cut to its last `keep` characters or ids."""
    if gen.prompt_ids is not None:
        return replace(gen, prompt_ids=gen.prompt_ids[len(gen.prompt_ids) - keep :])
    assert gen.prompt is not None
    return replace(gen, prompt=gen.prompt[len(gen.prompt) - keep :])


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
    in a worker thread). A prompt with a suffix (fill-in-the-middle) is left whole; a system
    prompt that cannot fit by itself is a RequestInvalid naming the messages."""
    limit = backend.info.context_limit
    if limit <= 0 or gen.suffix is not None:
        return gen
    before = backend.count_tokens(gen)
    if before < limit:
        return gen
    if gen.context_ids:
        gen = _cut_context(backend, gen, before, limit)
        if gen.context_ids[1:] or backend.count_tokens(gen) < limit:
            return gen
        gen = replace(gen, context_ids=())  # the prompt alone is past the context

    def fits(candidate: GenerationRequest) -> bool:
        return backend.count_tokens(candidate) < limit

    if gen.messages is None:  # a raw prompt keeps its end
        size = len(gen.prompt_ids) if gen.prompt_ids is not None else len(gen.prompt or "")
        keep = _keep_tail(size, lambda k: fits(_tail_of_prompt(gen, k)), size * limit // before)
        unit = "prompt ids" if gen.prompt_ids is not None else "prompt characters"
        kept, said = _tail_of_prompt(gen, keep), f"the first {size - keep} of {size} {unit}"
    else:  # the oldest messages go, then the start of the latest
        most = max(0, sum(m.role != "system" for m in gen.messages) - 1)
        cut = _fewest_cut(most, lambda n: fits(_cut_messages(gen, n)))
        kept, said = _cut_messages(gen, cut), f"{cut} messages"
        if not fits(kept):
            size = len(kept.messages[-1].content)  # type: ignore[index]
            guess = size * limit // backend.count_tokens(kept)
            keep = _keep_tail(size, lambda k: fits(_tail_of_latest(kept, k)), guess)
            kept = _tail_of_latest(kept, keep)
            said += f" and the first {size - keep} of {size} characters of the latest"
    left = backend.count_tokens(kept)
    if left >= limit and not kept.offered_tools:  # tools: the engine says what they need
        raise RequestInvalid(
            "messages",
            f"the system prompt alone needs {left} prompt tokens; the context holds {limit}",
        )
    log.warning(
        "truncating input prompt: %d tokens past the context of %d; dropped %s, %d left",
        before, limit, said, left,
    )  # fmt: skip
    return kept
