"""What a request gives back: TextDelta events while it runs, then one Finished (with its Stats),
delivered through a RequestHandle (an EventStream underneath). Part of the contract engine/api.py
gathers."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal, Protocol

# loop: the loop detector ended a reply stuck in a cycle (engine/loop_detector.py)
FinishReason = Literal["stop", "length", "loop", "abort", "error"]


@dataclass
class Stats:
    """Counters and timings of one finished request (also the `ember run --json` fields)."""

    runner: str = ""
    device: str = ""
    prompt_tokens: int = 0
    cached_tokens: int = 0  # prompt tokens served from the prefix cache (RAM or disk)
    generated_tokens: int = 0
    evicted_tokens: int = 0  # tokens dropped by the sink window so far in this sequence
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    context_tokens: int = 0  # tokens in the KV cache at the end
    context_limit: int = 0
    ttft_s: float = 0.0
    prefill_tok_s: float = 0.0
    decode_tok_s: float = 0.0

    @property
    def acceptance_rate(self) -> float:
        return self.accepted_tokens / self.drafted_tokens if self.drafted_tokens else 0.0


@dataclass(frozen=True)
class TopLogprob:
    """One likely token at a position: its id, its bytes, its log-probability."""

    token_id: int
    token: bytes
    logprob: float


@dataclass(frozen=True)
class TokenLogprob:
    """A reply token's log-probability under the model's raw distribution at its position
    (log-softmax of the logits, before penalties, masks, temperature and truncation), and the
    `top` most likely tokens there, most likely first.

    token: the bytes this token adds to the visible reply: its own bytes, less a leading part
    the reply's lstrip removed or a tail a stop string cut (so the tokens' bytes joined are the
    reply's bytes)."""

    token_id: int
    token: bytes
    logprob: float
    top: tuple[TopLogprob, ...] = ()


@dataclass(frozen=True)
class TextDelta:
    """New text (UTF-8 safe, stop strings held back) and the token ids that produced it.

    A token is reported in the delta that releases the last of its text (held-back tokens go out
    with the text they complete; the final delta carries the rest). logprobs (when the request
    asked for them) lines up with token_ids: logprobs[i] is token_ids[i]'s; tokens wholly inside
    a stop string that ended the reply have none, so logprobs may be shorter in the last delta.
    """

    text: str
    token_ids: tuple[int, ...]
    logprobs: tuple[TokenLogprob, ...] = ()


@dataclass(frozen=True)
class Finished:
    """The last event of every request."""

    reason: FinishReason
    text: str  # the whole reply
    token_ids: tuple[int, ...]
    stats: Stats
    error: str = ""  # one-line reason when reason == "error"
    refused: bool = False  # the request itself was refused (bad input), nothing was generated
    logprobs: tuple[TokenLogprob, ...] = ()  # every TextDelta's logprobs, in order
    stop_sequence: str = ""  # the request's stop string that ended the reply, if one did
    # the prompt's ids as the model read them, and the reply's ids trimmed to its visible text
    # (engine/reply_ids.py): a later request continues the exchange with context_ids =
    # prompt_ids + reply_ids (Ollama's `context`); empty where a backend cannot tell (remote)
    prompt_ids: tuple[int, ...] = ()
    reply_ids: tuple[int, ...] = ()


Event = TextDelta | Finished


class EventStream:
    """The event queue behind every RequestHandle: a producer thread push()es events, any
    thread iterates them; result() waits for the Finished event. Subclasses add abort()."""

    def __init__(self) -> None:
        self._events: queue.Queue[Event] = queue.Queue()
        self._done = threading.Event()
        self._final: Finished | None = None

    def push(self, event: Event) -> None:
        """Deliver one event (ignored once the request has finished)."""
        if self._done.is_set():
            return
        if isinstance(event, Finished):
            self._final = event
        self._events.put(event)
        if isinstance(event, Finished):
            self._done.set()

    def __iter__(self) -> Iterator[Event]:
        while True:
            event = self._events.get()
            yield event
            if isinstance(event, Finished):
                return

    def result(self) -> Finished:
        """Block until the request finishes; return its Finished event."""
        self._done.wait()
        assert self._final is not None
        return self._final

    @property
    def done(self) -> bool:
        return self._done.is_set()


class RequestHandle(Protocol):
    """A submitted request: iterate its events from any thread; abort() stops it early."""

    def __iter__(self) -> Iterator[Event]: ...

    def abort(self) -> None: ...

    def result(self) -> Finished:
        """Block until the request finishes; return its Finished event."""
        ...
