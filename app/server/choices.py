"""Several choices in one OpenAI reply (n > 1, or one per prompt of /v1/completions): each
choice is its own engine request, batched by the engine like concurrent requests; their
replies are merged here, whole (choices in index order, usage summed) or streamed (chunks
interleaved as each choice's tokens arrive, each chunk naming its choice's index)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Callable
from typing import Any

from ember.app.server.io import next_event
from ember.app.server.openai import Completion, usage
from ember.engine.api import Finished, RequestHandle, TextDelta


def merged_usage(fins: list[Finished], prompts: int) -> dict[str, int]:
    """Completion tokens of every choice; prompt tokens once per distinct prompt (n copies of
    one prompt read it once, as OpenAI counts)."""
    each = [usage(fin) for fin in fins]
    per_prompt = len(fins) // prompts
    prompt = sum(u["prompt_tokens"] for u in each[::per_prompt])
    completion = sum(u["completion_tokens"] for u in each)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def merged_whole(outs: list[Completion], fins: list[Finished], prompts: int) -> dict[str, Any]:
    wholes = [out.whole(fin) for out, fin in zip(outs, fins, strict=True)]  # once each: stateful
    body = wholes[0]
    body["choices"] = [whole["choices"][0] for whole in wholes]
    body["usage"] = merged_usage(fins, prompts)
    return body


def _data(chunk: dict[str, Any]) -> str:
    return f"data: {json.dumps(chunk)}\n\n"


async def stream_many(
    handles: list[RequestHandle],
    outs: list[Completion],
    include_usage: bool,
    chunks_of: Callable[[Completion, Any], list[dict[str, Any]]],
    prompts: int,
) -> AsyncGenerator[str, None]:
    """The choices' chunks as they come; chunks_of(out, event) gives one event's chunks."""
    iterators = [iter(h) for h in handles]
    fins: dict[int, Finished] = {}
    pending = {asyncio.ensure_future(next_event(it)): i for i, it in enumerate(iterators)}
    try:
        for out in outs:
            yield _data(out.first_chunk())
        while pending:
            done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                i = pending.pop(task)
                event = task.result()
                if event is None:
                    continue
                if isinstance(event, Finished):
                    fins[i] = event
                if isinstance(event, TextDelta | Finished):
                    for chunk in chunks_of(outs[i], event):
                        yield _data(chunk)
                if not isinstance(event, Finished):
                    pending[asyncio.ensure_future(next_event(iterators[i]))] = i
        if include_usage and len(fins) == len(outs):
            last = outs[0].usage_chunk(fins[0])
            last["usage"] = merged_usage([fins[i] for i in range(len(outs))], prompts)
            yield _data(last)
        yield "data: [DONE]\n\n"
    finally:
        for task in pending:
            task.cancel()
        for i, handle in enumerate(handles):
            if i not in fins:
                handle.abort()  # the client went away: stop and free the KV blocks
