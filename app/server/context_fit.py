"""Does a request fit the model's context? The OpenAI routes refuse one that does not, as
llama-server does: HTTP 400 with type `exceed_context_size_error`, `n_prompt_tokens` and
`n_ctx`. The Anthropic route refuses a prompt that cannot fit in its own shape; its max_tokens
is required and bounded by the server's cap already, so it is not added to the prompt there
(Claude Code asks for a large max_tokens on every request).

The rule (llama-server's): the prompt alone must leave room for a reply (prompt < n_ctx), and
when the client set max_tokens itself, prompt + max_tokens must fit too. Without an explicit
max_tokens the engine's StreamingLLM sink window lets a long reply go on past the context
(the oldest reply tokens leave the cache), so only the prompt is checked then; a prompt that
does not fit is refused, never silently cut in the middle by the sink window."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starlette.responses import Response

    from ember.engine.api import Backend, GenerationRequest

MESSAGE = "the request exceeds the available context size, try increasing it"


@dataclass(frozen=True)
class ContextExceeded:
    """Why a request does not fit: its prompt tokens, the reply it asked room for, n_ctx."""

    prompt_tokens: int
    max_tokens: int  # 0: the client did not set max_tokens
    context_limit: int

    tools: int = 0  # tools offered: their definitions count as prompt tokens

    def describe(self) -> str:
        asked = f"; max_tokens asks {self.max_tokens} more" if self.max_tokens else ""
        tools = f"; the {self.tools} tools count as prompt: offer fewer" if self.tools else ""
        return (
            f"{MESSAGE} (need {self.prompt_tokens} prompt tokens; "
            f"the context holds {self.context_limit}{asked}{tools})"
        )


async def overflow(
    backend: Backend, request: GenerationRequest, explicit_max_tokens: bool
) -> ContextExceeded | None:
    """None if the request fits (or the backend does not say its context: a remote server
    checks for itself); otherwise why not. The prompt is counted on the engine's thread."""
    import anyio

    limit = backend.info.context_limit
    if limit <= 0 or backend.health().status != "ok":
        return None  # a dead or wedged engine: submit answers for it, as the server error it is
    prompt_tokens = await anyio.to_thread.run_sync(backend.count_tokens, request)
    asked = request.sampling.max_tokens if explicit_max_tokens else 0
    if prompt_tokens < limit and prompt_tokens + asked <= limit:
        return None
    return ContextExceeded(prompt_tokens, asked, limit, len(request.offered_tools))


def openai_error(exceeded: ContextExceeded) -> Response:
    """llama-server's answer, field for field (the OpenAI error object)."""
    from starlette.responses import JSONResponse

    body = {
        "error": {
            "code": 400,
            "message": exceeded.describe(),
            "type": "exceed_context_size_error",
            "n_prompt_tokens": exceeded.prompt_tokens,
            "n_ctx": exceeded.context_limit,
        }
    }
    return JSONResponse(body, status_code=400)


def anthropic_message(exceeded: ContextExceeded) -> str:
    """Anthropic's own wording for a prompt that does not fit (Claude Code reads its start to
    compact the conversation), then the context's size."""
    e = exceeded
    tools = f"; the {e.tools} tools count as prompt" if e.tools else ""
    return (
        f"prompt is too long: {e.prompt_tokens} tokens > {e.context_limit - 1} maximum "
        f"(the context holds {e.context_limit} tokens{tools}; raise --ctx or shorten the prompt)"
    )
