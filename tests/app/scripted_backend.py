"""A Backend that replays scripted words on a thread: the server tests' stand-in for an engine."""

from __future__ import annotations

import threading

from ember.engine.api import (
    EngineInfo,
    EventStream,
    Finished,
    GenerationRequest,
    Health,
    Stats,
    TextDelta,
)


class ScriptedHandle(EventStream):
    """Streams words with a pause between them until done or aborted."""

    def __init__(self, words: list[str], delay_s: float, max_tokens: int) -> None:
        super().__init__()
        self._abort = threading.Event()
        self.aborted = False
        threading.Thread(target=self._run, args=(words, delay_s, max_tokens), daemon=True).start()

    def _run(self, words: list[str], delay_s: float, max_tokens: int) -> None:
        text, ids = "", []
        reason = "stop"
        for i, word in enumerate(words):
            if i >= max_tokens:
                reason = "length"
                break
            if self._abort.wait(delay_s):
                reason = "abort"
                self.aborted = True
                break
            text += word
            ids.append(i)
            self.push(TextDelta(word, (i,)))
        stats = Stats(runner="scripted", device="cpu", prompt_tokens=3, generated_tokens=len(ids))
        self.push(Finished(reason, text, tuple(ids), stats))  # type: ignore[arg-type]

    def abort(self) -> None:
        self._abort.set()


class ScriptedBackend:
    """Replays the same words for every request; records requests and handles."""

    def __init__(self, name: str, words: list[str], delay_s: float = 0.0) -> None:
        self.words = words
        self.delay_s = delay_s
        self.requests: list[GenerationRequest] = []
        self.handles: list[ScriptedHandle] = []
        self.closed = False
        self._info = EngineInfo(
            model=name, runner="scripted", device="cpu", architecture="fake", context_limit=512
        )

    @property
    def info(self) -> EngineInfo:
        return self._info

    def submit(self, request: GenerationRequest) -> ScriptedHandle:
        self.requests.append(request)
        handle = ScriptedHandle(self.words, self.delay_s, request.sampling.max_tokens)
        self.handles.append(handle)
        return handle

    def count_tokens(self, request: GenerationRequest) -> int:
        return 3

    def health(self) -> Health:
        return Health("closed", "backend closed") if self.closed else Health("ok")

    def close(self) -> None:
        self.closed = True
