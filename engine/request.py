"""What a caller asks the engine for: a GenerationRequest (messages or a prompt, tools, a
constraint) and the SamplingParams that pick each token. Validated at construction: a bad field
raises EngineError naming it. Part of the contract engine/api.py gathers."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ember.engine.errors import EngineError
from ember.models.text.tool_calls.calls import ToolCall

_request_ids = itertools.count(1)

DRY_BREAKERS = ("\n", ":", '"', "*")  # llama.cpp's default DRY sequence breakers
Role = Literal["system", "user", "assistant", "tool"]
# Variables the chat template sets itself; template_kwargs may not override them.
RESERVED_TEMPLATE_VARS = frozenset(
    {"messages", "tools", "add_generation_prompt", "bos_token", "eos_token"}
)
MAX_SEED = (1 << 64) - 1  # numpy's generators take any non-negative int; 64 bits is plenty
MAX_TOP_LOGPROBS = 20  # alternatives per token a request may ask for (OpenAI's limit)


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
    # most tokens inside the reply's <think> block before the engine forces </think>
    # (engine/reasoning_budget.py); None = unlimited; a no-op for a reply without such a block
    reasoning_budget: int | None = None
    # added to a token's logit before penalties and temperature (llama.cpp's logit_bias):
    # (token id, bias) pairs, bias in [-100, 100], -100 (or -inf: OpenAI's false) bans the
    # token; (text, bias) pairs bias each of the text's token ids (the engine tokenizes them
    # and checks every id against the vocabulary)
    logit_bias: tuple[tuple[int, float], ...] = ()
    logit_bias_text: tuple[tuple[str, float], ...] = ()

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
            (
                "reasoning_budget",
                self.reasoning_budget is None or 0 <= self.reasoning_budget <= 1 << 20,
                "must be in [0, 1048576] tokens (or None: unlimited)",
            ),
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
        checks += _bias_checks(self.logit_bias, self.logit_bias_text)
        for name, ok, reason in checks:
            if not ok:
                shown = repr(getattr(self, name))[:120]
                raise EngineError(f"sampling {name}={shown}: {reason}")


MAX_LOGIT_BIAS = 1024  # entries per request (OpenAI allows 300; llama.cpp no limit)


def _bias_checks(
    ids: tuple[tuple[int, float], ...], texts: tuple[tuple[str, float], ...]
) -> list[tuple[str, bool, str]]:
    def fine(bias: float) -> bool:  # -inf (a ban) or finite in [-100, 100]
        return bias == -math.inf or -100.0 <= bias <= 100.0

    return [
        (
            "logit_bias",
            len(ids) <= MAX_LOGIT_BIAS and all(i >= 0 and fine(b) for i, b in ids),
            f"at most {MAX_LOGIT_BIAS} ids >= 0 with biases in [-100, 100]",
        ),
        (
            "logit_bias_text",
            len(texts) <= MAX_LOGIT_BIAS and all(t and fine(b) for t, b in texts),
            f"at most {MAX_LOGIT_BIAS} non-empty texts with biases in [-100, 100]",
        ),
    ]


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

    An assistant turn may carry the tool calls it made and the reasoning it wrote (sent back
    by a client; only a harmony template reads it: models/text/tool_calls/render.py); a `tool`
    turn is one call's result (tool_call_id names the call, name the function)."""

    role: Role
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str = ""
    name: str = ""
    reasoning: str = ""

    def __post_init__(self) -> None:
        if self.role not in ("system", "user", "assistant", "tool"):
            raise EngineError(
                f"message role {self.role!r}: must be system, user, assistant or tool"
            )
        if self.tool_calls and self.role != "assistant":
            raise EngineError("message tool_calls: only assistant messages make tool calls")
        if self.reasoning and self.role != "assistant":
            raise EngineError("message reasoning: only assistant messages reason")

    def template_dict(self) -> dict[str, Any]:
        """The message as chat templates read it (OpenAI's shape)."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [call.to_openai() for call in self.tool_calls]
        if self.tool_call_id:
            out["tool_call_id"] = self.tool_call_id
        if self.name:
            out["name"] = self.name
        if self.reasoning:
            out["reasoning_content"] = self.reasoning
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
    # fill-in-the-middle: prompt is the text before the cursor, suffix the text after it; the
    # engine builds the model's FIM prompt (models/text/fim.py), refused without FIM tokens
    suffix: str | None = None
    # token ids of an earlier exchange this request continues (Ollama's `context`: a Finished
    # event's prompt_ids + reply_ids): prepended to the prompt's own ids, whose leading BOS is
    # then dropped; every id is checked against the vocabulary when the prompt is encoded
    context_ids: tuple[int, ...] = ()
    request_id: int = field(default_factory=lambda: next(_request_ids))

    def __post_init__(self) -> None:
        given = [x is not None for x in (self.messages, self.prompt, self.prompt_ids)]
        if sum(given) != 1:
            raise EngineError("request: give exactly one of messages, prompt or prompt_ids")
        if self.suffix is not None and self.prompt is None:
            raise EngineError("request suffix: only a raw prompt can have a suffix")
        if self.context_ids and self.suffix is not None:
            raise EngineError("request context_ids: a fill-in-the-middle prompt continues nothing")
        if any(isinstance(t, bool) or not isinstance(t, int) or t < 0 for t in self.context_ids):
            raise EngineError("request context_ids: token ids are integers >= 0")
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
