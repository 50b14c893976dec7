"""FakeBackend: a `Backend` that replays scripted replies token by token, for tests and `--fake` demos.

Tokens are words (with their trailing space). It honours abort, can fail after a number of tokens,
simulates a prefix cache (tokens shared with the previous prompt count as cached) and a sink window
(tokens beyond the context limit count as evicted), and reports Stats like the real engine.
"""

from __future__ import annotations

import itertools
import re
import threading
import time
from dataclasses import dataclass, field

from ember.engine.api import (
    EngineError,
    EngineInfo,
    EngineOptions,
    EventStream,
    Finished,
    GenerationRequest,
    Health,
    Stats,
    TextDelta,
)

_TOKEN = re.compile(r"\s*\S+|\s+")

DEMO_REPLY = """Here is a short answer with some **Markdown**:

1. a list item
2. another one with `inline code`

```python
def greet(name: str) -> str:
    return f"Hello, {name}!"
```

| model | quant |
|-------|-------|
| fake  | none  |
"""


def split_tokens(text: str) -> list[str]:
    """The fake tokenizer: words with their leading whitespace."""
    return _TOKEN.findall(text)


@dataclass
class FakeScript:
    """What the fake replies and how fast; mutate it between requests in tests."""

    replies: list[str] = field(default_factory=lambda: [DEMO_REPLY])
    tokens_per_s: float = 200.0  # 0 = as fast as possible
    ttft_s: float = 0.0
    fail_after_tokens: int | None = None  # then Finished(reason="error")
    error: str = "fake failure"
    echo: bool = False  # reply "You said: <last user message>" instead of the scripted replies
    thinking_switch: bool = False  # report a chat template with enable_thinking


class FakeHandle(EventStream):
    """A request being replayed on its own thread."""

    def __init__(self, backend: FakeBackend, request: GenerationRequest, reply: str) -> None:
        super().__init__()
        self._abort = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(backend, request, reply), daemon=True, name="fake-backend"
        )
        self._thread.start()

    def abort(self) -> None:
        self._abort.set()

    def _run(self, backend: FakeBackend, request: GenerationRequest, reply: str) -> None:
        script = backend.script
        start = time.perf_counter()
        prompt_tokens, cached_tokens = backend.prefill(request)
        tokens = split_tokens(reply)[: request.sampling.max_tokens]
        out: list[str] = []
        reason: str = "stop" if len(tokens) == len(split_tokens(reply)) else "length"
        error = ""
        ttft = 0.0
        interval = 1.0 / script.tokens_per_s if script.tokens_per_s > 0 else 0.0
        if script.ttft_s and self._abort.wait(script.ttft_s):
            reason = "abort"
        for i, token in enumerate(tokens if reason != "abort" else []):
            if script.fail_after_tokens is not None and i >= script.fail_after_tokens:
                reason, error = "error", script.error
                break
            # wait for this token's slot on a fixed schedule, so late wake-ups (GIL, a busy
            # CPU) are caught up and the average rate stays tokens_per_s
            delay = start + script.ttft_s + i * interval - time.perf_counter()
            if self._abort.is_set() or (delay > 0 and self._abort.wait(delay)):
                reason = "abort"
                break
            out.append(token)
            if i == 0:
                ttft = time.perf_counter() - start
            self.push(TextDelta(token, (i,)))
        if reason in ("stop", "length") and script.fail_after_tokens is not None:
            reason, error = "error", script.error  # a reply shorter than fail_after still fails
        elapsed = max(time.perf_counter() - start - ttft, 1e-9)
        stats = backend.stats_for(prompt_tokens, cached_tokens, len(out), ttft, elapsed)
        text = "".join(out)
        self.push(Finished(reason, text, tuple(range(len(out))), stats, error))  # type: ignore[arg-type]


class FakeBackend:
    """Implements `ember.engine.api.Backend` without a model."""

    def __init__(
        self,
        options: EngineOptions | None = None,
        script: FakeScript | None = None,
        context_limit: int | None = None,
    ) -> None:
        if options is None:  # the defaults every caller gets (app/options.py), not a copy
            from ember.app.config import Settings
            from ember.app.options import engine_options

            options = engine_options("fake-model", Settings())
        self.options = options
        self.script = script or FakeScript()
        self.requests: list[GenerationRequest] = []
        self.closed = False
        self._replies = itertools.cycle(self.script.replies)
        self._last_prompt: list[str] = []
        self._lock = threading.Lock()
        limit = context_limit or self.options.ctx
        self._info = EngineInfo(
            model=self.options.model,
            runner="fake",
            device="cpu",
            architecture="fake",
            context_limit=limit,
            features={
                "sink_window": self.options.window != 0,
                "prefix_cache": True,
                "thinking_switch": self.script.thinking_switch,
            },
        )

    @property
    def info(self) -> EngineInfo:
        return self._info

    def submit(self, request: GenerationRequest) -> FakeHandle:
        if self.closed:
            raise EngineError(f"{self.options.model}: the backend is closed")
        with self._lock:
            self.requests.append(request)
            reply = self._echo(request) if self.script.echo else next(self._replies)
        return FakeHandle(self, request, reply)

    def count_tokens(self, request: GenerationRequest) -> int:
        return len(self._prompt_tokens(request))

    def health(self) -> Health:
        return Health("closed", "backend closed") if self.closed else Health("ok")

    def close(self) -> None:
        self.closed = True

    def prefill(self, request: GenerationRequest) -> tuple[int, int]:
        """(prompt tokens, of which cached): the common prefix with the previous prompt is cached."""
        tokens = self._prompt_tokens(request)
        with self._lock:
            cached = 0
            for a, b in zip(tokens, self._last_prompt, strict=False):
                if a != b:
                    break
                cached += 1
            self._last_prompt = tokens
        return len(tokens), cached

    def stats_for(
        self, prompt_tokens: int, cached_tokens: int, generated: int, ttft: float, decode_s: float
    ) -> Stats:
        """Stats as the real engine reports them (evicted = what overflowed the context)."""
        limit = self._info.context_limit
        total = prompt_tokens + generated
        drafting = self.options.draft != "none"
        return Stats(
            runner="fake",
            device="cpu",
            prompt_tokens=prompt_tokens,
            cached_tokens=cached_tokens,
            generated_tokens=generated,
            evicted_tokens=max(0, total - limit),
            drafted_tokens=generated if drafting else 0,
            accepted_tokens=(generated * 3) // 4 if drafting else 0,
            context_tokens=min(total, limit),
            context_limit=limit,
            ttft_s=ttft,
            prefill_tok_s=prompt_tokens / ttft if ttft else 0.0,
            decode_tok_s=generated / decode_s if generated else 0.0,
        )

    @staticmethod
    def _prompt_tokens(request: GenerationRequest) -> list[str]:
        if request.messages is not None:
            text = "".join(f"<{m.role}> {m.content}\n" for m in request.messages)
        else:
            text = request.prompt or " ".join(map(str, request.prompt_ids or ()))
        return split_tokens(text)

    @staticmethod
    def _echo(request: GenerationRequest) -> str:
        users = [m.content for m in request.messages or () if m.role == "user"]
        return f"You said: {users[-1] if users else request.prompt or ''}"
