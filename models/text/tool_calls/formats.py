"""How a model family writes tool calls, and which family a chat template belongs to.

Each format lists the shapes a call can take in the reply: an opening marker, a closing marker
(None: the call runs to the end of the reply) and the body's language (JSON, or a Python call for
Gemma's ```tool_code``` blocks). `native` formats are rendered by the model's own template (it
reads `tools`); the generic format is Ember's own, for templates that know no tools: Ember writes
the tool list into the system prompt and asks for the Hermes shape (docs/structured-output.md).

| format  | families                         | a call in the reply                                     |
|---------|----------------------------------|---------------------------------------------------------|
| hermes  | Qwen 2.5 / 3, Hermes, SmolLM3    | <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call> |
| llama3  | Llama 3.1 / 3.2 / 3.3            | {"name": ..., "parameters": {...}} (or after <|python_tag|>) |
| mistral | Mistral, Mixtral, Ministral      | [TOOL_CALLS][{"name": ..., "arguments": {...}}]          |
| generic | Gemma, SmolLM2, base models, any | <tool_call>...</tool_call> as hermes; also ```tool_code``` |
| harmony | gpt-oss                          | <|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...} |

Harmony is a whole reply format, not a call shape: reasoning, answer and calls are channel
messages, which models/text/harmony reads (`channels`); it has no shapes.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CallShape:
    """One way a call appears: open marker, close marker (None = end of reply), body kind."""

    open: str
    close: str | None
    body: str = "json"  # "json" | "python"


@dataclass(frozen=True)
class ToolFormat:
    """A family's tool-call syntax."""

    name: str
    native: bool  # the model's template renders `tools` and assistant `tool_calls` itself
    shapes: tuple[CallShape, ...]
    arguments_key: str = "arguments"  # llama3 says "parameters"
    bare_json: bool = False  # a reply that is one JSON object is a call (llama3)
    list_body: bool = False  # the body is a JSON list of calls (mistral)
    channels: bool = False  # harmony: calls are channel messages (models/text/harmony)

    @property
    def primary(self) -> CallShape:
        """The shape Ember asks for and the grammar enforces."""
        if not self.shapes:
            raise ValueError(f"tool format {self.name}: calls are channel messages, not shapes")
        return self.shapes[0]


TOOL_CALL = CallShape("<tool_call>", "</tool_call>")
HERMES = ToolFormat("hermes", True, (TOOL_CALL,))
LLAMA3 = ToolFormat(
    "llama3", True, (CallShape("<|python_tag|>", None),), "parameters", bare_json=True
)
MISTRAL = ToolFormat("mistral", True, (CallShape("[TOOL_CALLS]", None),), list_body=True)
GENERIC = ToolFormat("generic", False, (TOOL_CALL, CallShape("```tool_code", "```", "python")))
HARMONY = ToolFormat("harmony", True, (), channels=True)
FORMATS = {f.name: f for f in (HERMES, LLAMA3, MISTRAL, GENERIC, HARMONY)}


def tool_format(name: str) -> ToolFormat:
    """A format by name (ValueError naming the choices)."""
    try:
        return FORMATS[name]
    except KeyError:
        raise ValueError(f"tool format {name!r}: choose one of {', '.join(FORMATS)}") from None


def detect_tool_format(template_source: str) -> ToolFormat:
    """The format a chat template speaks; generic when it does not render `tools`. Harmony
    (channel messages) whether or not it renders tools: its replies are split either way."""
    source = template_source or ""
    if "<|channel|>" in source and "<|message|>" in source:
        return HARMONY
    if "tools" not in source:
        return GENERIC
    if "[TOOL_CALLS]" in source:
        return MISTRAL
    if "<tool_call>" in source:
        return HERMES
    if "<|python_tag|>" in source or "<|start_header_id|>" in source:
        return LLAMA3
    return GENERIC  # reads tools, but in a syntax Ember does not know: ask for the generic one
