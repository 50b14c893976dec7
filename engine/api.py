"""The engine's public contract: requests, sampling parameters, stream events, stats, handles.

Everything outside the engine (CLI, TUI, server) talks to it through these types only. This module
imports no torch: the TUI imports it freely. `Engine` and `EngineThread` implementations live in
`engine.engine` and `engine.engine_thread` and are created through `engine.load.load_engine()`.
"""

from __future__ import annotations

import itertools
import json
import queue
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from ember.engine.errors import EngineError
from ember.models.quants.kv_cache import KV_CACHE_TYPES
from ember.models.text.chat_format import CHAT_FORMATS
from ember.models.text.tool_calls.calls import ToolCall

_request_ids = itertools.count(1)

# loop: the loop detector ended a reply stuck in a cycle (engine/loop_detector.py)
FinishReason = Literal["stop", "length", "loop", "abort", "error"]
DRY_BREAKERS = ("\n", ":", '"', "*")  # llama.cpp's default DRY sequence breakers
Role = Literal["system", "user", "assistant", "tool"]
# Variables the chat template sets itself; template_kwargs may not override them.
RESERVED_TEMPLATE_VARS = frozenset(
    {"messages", "tools", "add_generation_prompt", "bos_token", "eos_token"}
)
ModelFormat = Literal["gguf", "safetensors"]
MAX_SEED = (1 << 64) - 1  # numpy's generators take any non-negative int; 64 bits is plenty
MAX_TOP_LOGPROBS = 20  # alternatives per token a request may ask for (OpenAI's limit)
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class SamplingParams:
    """How to pick each next token. temperature 0 is exact argmax (greedy)."""

    temperature: float = 0.0
    top_k: int = 0  # 0 = off
    top_p: float = 1.0
    min_p: float = 0.0
    repeat_penalty: float = 1.0  # 1.0 = off (llama.cpp's multiplicative rule)
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    penalty_last_n: int = 64  # how many recent tokens the penalties look at
    # DRY (engine/dry.py): logit -= multiplier * base ** (repeat length - allowed length)
    dry_multiplier: float = 0.0  # 0 = off
    dry_base: float = 1.75
    dry_allowed_length: int = 2  # repeats up to this many tokens are free
    dry_penalty_last_n: int = -1  # how many recent tokens DRY looks at (-1 = all, 0 = off)
    dry_sequence_breakers: tuple[str, ...] = DRY_BREAKERS  # a repeat never spans one of these
    # the loop detector (engine/loop_detector.py): end a reply whose last loop_min_tokens or
    # more tokens are one cycle repeated at least 3 times (0 = off; ignore_eos turns it off too:
    # such a caller asked for exactly max_tokens)
    loop_min_tokens: int = 64
    seed: int | None = None
    max_tokens: int = 256
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()  # added to the model's EOS / end-of-turn ids
    ignore_eos: bool = False
    # log-probabilities of the reply's tokens (engine/logprobs.py): off by default, so the
    # default path computes nothing; top_logprobs alternatives per token (needs logprobs)
    logprobs: bool = False
    top_logprobs: int = 0

    def __post_init__(self) -> None:
        # the ranges of app/parameters' table (the CLI, settings and server views share them;
        # tests/app/test_parameters.py keeps the two equal)
        checks: list[tuple[str, bool, str]] = [
            ("temperature", 0.0 <= self.temperature <= 10.0, "must be in [0, 10]"),
            ("top_k", 0 <= self.top_k <= 1 << 20, "must be in [0, 1048576]"),
            ("top_p", 0.0 < self.top_p <= 1.0, "must be in (0, 1]"),
            ("min_p", 0.0 <= self.min_p <= 1.0, "must be in [0, 1]"),
            ("repeat_penalty", 0.0 < self.repeat_penalty <= 10.0, "must be in (0, 10]"),
            (
                "presence_penalty",
                -2.0 <= self.presence_penalty <= 2.0,
                "must be in [-2, 2]",
            ),
            (
                "frequency_penalty",
                -2.0 <= self.frequency_penalty <= 2.0,
                "must be in [-2, 2]",
            ),
            ("penalty_last_n", 0 <= self.penalty_last_n <= 1 << 20, "must be in [0, 1048576]"),
            ("dry_multiplier", 0.0 <= self.dry_multiplier <= 100.0, "must be in [0, 100]"),
            ("dry_base", 1.0 <= self.dry_base <= 100.0, "must be in [1, 100]"),
            ("dry_allowed_length", 1 <= self.dry_allowed_length <= 1 << 16, "must be >= 1"),
            (
                "dry_penalty_last_n",
                -1 <= self.dry_penalty_last_n <= 1 << 20,
                "must be -1 (all) or >= 0",
            ),
            (
                "dry_sequence_breakers",
                len(self.dry_sequence_breakers) <= 16
                and all(0 < len(b) <= 40 for b in self.dry_sequence_breakers),
                "at most 16 strings of 1 to 40 characters",
            ),
            ("loop_min_tokens", 0 <= self.loop_min_tokens <= 1 << 20, "must be >= 0 (0 = off)"),
            ("max_tokens", 1 <= self.max_tokens <= 1 << 20, "must be in [1, 1048576]"),
            (
                "seed",
                self.seed is None or 0 <= self.seed <= MAX_SEED,
                f"must be between 0 and {MAX_SEED}",
            ),
            ("stop", len(self.stop) <= 16 and all(self.stop), "at most 16 non-empty strings"),
            (
                "top_logprobs",
                0 <= self.top_logprobs <= MAX_TOP_LOGPROBS
                and (self.logprobs or not self.top_logprobs),
                f"must be between 0 and {MAX_TOP_LOGPROBS}, and needs logprobs",
            ),
        ]
        for name, ok, reason in checks:
            if not ok:
                raise EngineError(f"sampling {name}={getattr(self, name)!r}: {reason}")


ConstraintKind = Literal["json_schema", "json_object", "regex", "lark", "gbnf"]
CONSTRAINT_KINDS: tuple[str, ...] = ("json_schema", "json_object", "regex", "lark", "gbnf")
MAX_CONSTRAINT_CHARS = 1 << 20


@dataclass(frozen=True)
class ConstraintSpec:
    """What the reply must match: a JSON schema (JSON text), any JSON object, a regex, or a Lark
    or GBNF grammar. The engine compiles it against the model's vocabulary (engine/constraint.py)
    and masks every sampled token with it; generation ends when the grammar is complete."""

    kind: ConstraintKind
    text: str = ""  # the schema, regex or grammar; empty for json_object

    def __post_init__(self) -> None:
        if self.kind not in CONSTRAINT_KINDS:
            raise EngineError(
                f"constraint kind {self.kind!r}: choose one of {', '.join(CONSTRAINT_KINDS)}"
            )
        if self.kind != "json_object" and not self.text.strip():
            raise EngineError(f"constraint {self.kind}: the text is empty")
        if len(self.text) > MAX_CONSTRAINT_CHARS:
            raise EngineError(
                f"constraint {self.kind}: {len(self.text)} characters exceeds "
                f"{MAX_CONSTRAINT_CHARS}"
            )


@dataclass(frozen=True)
class ChatMessage:
    """One turn of a conversation, as the chat template sees it.

    An assistant turn may carry the tool calls it made; a `tool` turn is one call's result
    (tool_call_id names the call, name the function)."""

    role: Role
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str = ""
    name: str = ""

    def __post_init__(self) -> None:
        if self.role not in ("system", "user", "assistant", "tool"):
            raise EngineError(
                f"message role {self.role!r}: must be system, user, assistant or tool"
            )
        if self.tool_calls and self.role != "assistant":
            raise EngineError("message tool_calls: only assistant messages make tool calls")

    def template_dict(self) -> dict[str, Any]:
        """The message as chat templates read it (OpenAI's shape)."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [call.to_openai() for call in self.tool_calls]
        if self.tool_call_id:
            out["tool_call_id"] = self.tool_call_id
        if self.name:
            out["name"] = self.name
        return out


@dataclass(frozen=True)
class ToolSpec:
    """A function the model may call: its name, what it does, a JSON Schema of its arguments."""

    name: str
    description: str = ""
    parameters: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if (
            not self.name
            or len(self.name) > 64
            or not all(c.isalnum() or c in "_-." for c in self.name)
        ):
            raise EngineError(f"tool name {self.name!r}: 1-64 letters, digits, _ - or .")
        if self.parameters is not None and not isinstance(self.parameters, Mapping):
            raise EngineError(f"tool {self.name} parameters: must be a JSON Schema object")

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "description": self.description}
        out["parameters"] = (
            dict(self.parameters)
            if self.parameters is not None
            else {
                "type": "object",
                "properties": {},
            }
        )
        return out


@dataclass(frozen=True)
class GenerationRequest:
    """Exactly one of messages (chat-templated), prompt (raw text) or prompt_ids."""

    messages: tuple[ChatMessage, ...] | None = None
    prompt: str | None = None
    prompt_ids: tuple[int, ...] | None = None
    sampling: SamplingParams = field(default_factory=SamplingParams)
    add_bos: bool | None = None  # None = as the model's metadata says (raw prompts only)
    constraint: ConstraintSpec | None = None  # masks every sampled token (engine/constraint.py)
    tools: tuple[ToolSpec, ...] = ()  # functions the model may call (chat requests)
    # "auto" (the model decides), "none" (no tools offered), "required" (one call, enforced by
    # a grammar) or a tool's name (a call to that one, enforced)
    tool_choice: str = "auto"
    template_kwargs: Mapping[str, Any] = field(default_factory=dict)  # e.g. enable_thinking
    request_id: int = field(default_factory=lambda: next(_request_ids))

    def __post_init__(self) -> None:
        given = [x is not None for x in (self.messages, self.prompt, self.prompt_ids)]
        if sum(given) != 1:
            raise EngineError("request: give exactly one of messages, prompt or prompt_ids")
        names = [tool.name for tool in self.tools]
        if len(set(names)) != len(names):
            raise EngineError("request tools: two tools have the same name")
        if self.tool_choice not in ("auto", "none", "required") and self.tool_choice not in names:
            raise EngineError(f"request tool_choice {self.tool_choice!r}: no tool has that name")
        if self.tool_choice == "required" and not self.tools:
            raise EngineError("request tool_choice 'required': give at least one tool")
        if self.tools and self.messages is None:
            raise EngineError("request tools: only chat requests (messages) can use tools")
        if self.forces_tool_call and self.constraint is not None:
            raise EngineError("request: a forced tool call and a constraint cannot be combined")
        for key in self.template_kwargs:
            if not isinstance(key, str) or not key.isidentifier() or key in RESERVED_TEMPLATE_VARS:
                raise EngineError(f"request template_kwargs: {key!r} is not allowed")
        try:
            json.dumps(dict(self.template_kwargs))
        except (TypeError, ValueError):
            raise EngineError("request template_kwargs: values must be JSON values") from None

    @property
    def forces_tool_call(self) -> bool:
        """tool_choice asks for a call (required or a named tool): a grammar enforces it."""
        return bool(self.tools) and self.tool_choice not in ("auto", "none")

    @property
    def offered_tools(self) -> tuple[ToolSpec, ...]:
        """The tools shown to the model (none with tool_choice "none")."""
        return () if self.tool_choice == "none" else self.tools


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


Event = TextDelta | Finished


@dataclass(frozen=True)
class ModelFiles:
    """A local model as app resolved it (registry name, alias or path): what the engine loads.

    The engine never looks a reference up itself: the resolver in app (app/loading.py) turns
    `EngineOptions.model` (and a `--draft MODEL`) into this. `digest` is the one content
    digest of the model's files (the registry's SHA-256, computed once per file and cached);
    it keys the disk prefix store and the torch runner's packed-weight cache.
    """

    name: str  # display name: EngineInfo.model, `ember list`
    path: Path  # the .gguf file (first shard) or the safetensors folder
    format: ModelFormat
    digest: str  # lowercase hex SHA-256

    def __post_init__(self) -> None:
        if self.format not in ("gguf", "safetensors"):
            raise EngineError(f"model {self.name}: format {self.format!r} is not gguf/safetensors")
        if not _SHA256.fullmatch(self.digest):
            raise EngineError(f"model {self.name}: digest {self.digest!r} is not a SHA-256")


Progress = Callable[[str, int, int], None]  # (stage, done, total): EngineOptions.progress
AUTO_CTX = 0  # EngineOptions.ctx: the largest context that fits free RAM (engine/context_size.py)


@dataclass(frozen=True)
class EngineOptions:
    """How to load a model; every field maps to an `ember run` flag (app/options.py builds it
    from the settings file, the environment and the flags)."""

    model: str
    runner: str = "auto"  # auto | torch | llama.cpp | remote
    device: str = "auto"  # auto | cpu | cuda | mps
    threads: int = 0  # 0 = physical cores
    ctx: int = 4096  # context limit in tokens; AUTO_CTX (0) = the largest that fits free RAM
    kv_cache: str = "f16"  # f16 | q8 | q4: the KV cache's element type (models/quants/kv_cache)
    kv_budget_bytes: int = 0  # 0 = derived from ctx
    block_size: int = 16
    sink: int = 4
    window: int = -1  # -1 = derived from ctx; 0 = sink window off (a full cache waits/preempts)
    draft: str = "none"  # none | lookup | self | MODEL
    draft_tokens: int = 4
    prefix_cache: bool = True
    max_batch: int = 8  # sequences decoded together
    prefill_chunk: int = 512  # most prompt tokens of one sequence per forward (chunked prefill)
    prefix_cache_dir: str = ""  # disk snapshots (app: <cache dir>/prefix); "" = none
    prefix_disk_bytes: int = 2 << 30  # size cap of the disk snapshots (LRU); 0 = no disk cache
    packed_cache_dir: str = ""  # torch runner's converted weights (app: <cache>/packed); "" = off
    remote_url: str = ""
    remote_api_key: str = ""
    chat_format: str = "auto"  # auto | template | scaffold (base-model chat)
    # what a long wait is doing and how far: progress(stage, done, total), from the loading
    # thread (packing or loading weights, layer by layer) and the engine thread (a long first
    # prefill, chunk by chunk); app shows it (app/progress.py). Not part of equality.
    progress: Progress | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.threads < 0:
            raise EngineError(f"threads={self.threads}: must be >= 0 (0 = physical cores)")
        if self.ctx != AUTO_CTX and self.ctx < 16:
            raise EngineError(f"ctx={self.ctx}: must be at least 16 tokens (or 0: auto)")
        if self.kv_cache not in KV_CACHE_TYPES:
            raise EngineError(
                f"kv_cache={self.kv_cache!r}: choose one of {', '.join(KV_CACHE_TYPES)}"
            )
        if self.block_size < 1 or self.block_size & (self.block_size - 1):
            raise EngineError(f"block_size={self.block_size}: must be a power of two")
        if self.sink < 0 or self.window < -1:
            raise EngineError("sink must be >= 0 and window >= -1")
        if self.prefill_chunk < 1 or self.max_batch < 1:
            raise EngineError("prefill_chunk and max_batch must be >= 1")
        if self.kv_budget_bytes < 0 or self.prefix_disk_bytes < 0:
            raise EngineError("kv_budget_bytes and prefix_disk_bytes must be >= 0")
        if not 1 <= self.draft_tokens <= 32:
            raise EngineError(f"draft_tokens={self.draft_tokens}: must be between 1 and 32")
        if self.chat_format not in CHAT_FORMATS:
            raise EngineError(
                f"chat_format={self.chat_format!r}: choose one of {', '.join(CHAT_FORMATS)}"
            )


@dataclass(frozen=True)
class EngineInfo:
    """What is loaded, for status bars and `--json` output."""

    model: str
    runner: str
    device: str
    architecture: str
    context_limit: int
    features: dict[str, bool] = field(default_factory=dict)  # sink_window, prefix_cache, draft...
    tool_format: str = "generic"  # how the model writes tool calls (models/text/tool_calls)
    kv_cache: str = ""  # the KV cache type asked for: f16 | q8 | q4 (models/quants/kv_cache)
    kv_element: str = ""  # how the runner stores it: float16, bfloat16, int8, q8_0, q4_0...
    kv_cache_bytes: int = 0  # the KV pool the runner allocated (all layers, K and V)
    context_note: str = ""  # one line on how the context was chosen (`--ctx auto`), else ""


HealthStatus = Literal["ok", "wedged", "dead", "closed"]


@dataclass(frozen=True)
class Health:
    """Whether a backend can serve requests now (the server's /health reports it).

    ok: serving (possibly busy). wedged: one engine step (or call) has run longer than the
    backend's limit, so new requests would wait behind it. dead: the engine cannot serve any more
    (its thread ended, or it failed beyond recovery); every new request fails at once with
    `detail`. closed: close() was called.
    """

    status: HealthStatus = "ok"
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


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


class Backend(Protocol):
    """What the CLI, TUI and server need from an engine (a fake backend implements it too)."""

    @property
    def info(self) -> EngineInfo: ...

    def submit(self, request: GenerationRequest) -> RequestHandle: ...

    def count_tokens(self, request: GenerationRequest) -> int: ...

    def health(self) -> Health:
        """Liveness: cheap, never blocks, callable from any thread."""
        ...

    def close(self) -> None: ...
