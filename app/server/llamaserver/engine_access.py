"""Running a function on a served model's engine thread, for the routes that need its tokenizer
or chat template rather than a generation (a remote backend has neither: 501)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ember.app.server.errors import RequestInvalid
from ember.errors import EmberError

if TYPE_CHECKING:
    from ember.app.server.pool import ModelPool
    from ember.engine.engine import Engine

T = TypeVar("T")


async def on_engine(pool: ModelPool, model: Any, fn: Callable[[Engine], T]) -> tuple[str, T]:
    """(model name, fn(engine)) run between engine steps; the model is loaded if it is not."""
    import anyio

    if model is not None and (not isinstance(model, str) or not 0 < len(model) <= 512):
        raise RequestInvalid("model", "must be a non-empty string", status=400)
    try:
        name, backend = await pool.acquire(model)
    except EmberError as exc:  # the model exists but failed to load
        raise RequestInvalid("model", str(exc), status=503) from None
    try:
        call = getattr(backend, "call", None)
        if call is None:
            raise RequestInvalid(
                "model", f"{name} is served by a remote server: no local tokenizer", status=501
            )
        return name, await anyio.to_thread.run_sync(call, fn)
    finally:
        pool.release(name)
