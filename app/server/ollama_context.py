"""Ollama's `context` on /api/generate: the final response returns the token ids of the prompt
and the visible reply (engine Finished.prompt_ids + reply_ids); a later request that passes them
back continues from them, its own prompt's ids appended (the engine drops their BOS), templated
or `raw`. The ids are the engine's own, so a continued exchange hits the prefix cache for all of
the earlier one. A context longer than the model's context is cut at its head by
ollama_truncate.py, as Ollama cuts a long prompt.

Here: the ids checked against the loaded model's vocabulary (a 400 naming the first bad one),
which only a local engine has; a remote backend cannot continue token ids."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ember.app.server.errors import RequestInvalid

if TYPE_CHECKING:
    from ember.engine.api import Backend, Finished, GenerationRequest


def check_context(backend: Backend, gen: GenerationRequest) -> None:
    """RequestInvalid naming `context` (or its bad element) unless every id is in the model's
    vocabulary (blocking: it asks the engine thread; call it in a worker thread)."""
    if not gen.context_ids:
        return
    call = getattr(backend, "call", None)
    if call is None:
        raise RequestInvalid(
            "context", "this model is served by a remote server, which takes no token ids", 400
        )
    vocab = int(call(lambda engine: engine.prompts.vocab_size))
    for i, token in enumerate(gen.context_ids):
        if token >= vocab:
            raise RequestInvalid(f"context[{i}]", f"{token} is outside the vocabulary ({vocab})")


def context_of(fin: Finished) -> list[int]:
    """The `context` a final /api/generate response carries."""
    return [*fin.prompt_ids, *fin.reply_ids]
