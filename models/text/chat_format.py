"""How a model's conversations become prompt ids: its chat template, or the base-model scaffold.

`choose_chat_format` makes the choice once per loaded model: `auto` asks base_chat.model_kind
whether the model is pretrained (then the scaffold) or instruction-tuned (then its template);
`template` and `scaffold` force one. engine/runners/factory.py builds the renderer it names
(TemplateChat or ScaffoldChat); the engine, and so the TUI, `ember run` and the server, all
render through it.

A base model with tools: the scaffold has no tool format (a pretrained model was never taught
a way to call functions), while the model's template has one and a forced call is enforced by a
grammar in the engine. So a request with tools, tool turns or template kwargs (a template's own
switches) renders through the model's template, and the scaffold's stops do not apply to it;
every other chat request goes through the scaffold.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ember.models.errors import TemplateError
from ember.models.text.base_chat.scaffold import Scaffold

if TYPE_CHECKING:
    from ember.models.text.tokenizers.base import Tokenizer

CHAT_FORMATS = ("auto", "template", "scaffold")


def choose_chat_format(
    path: Path, model_format: str, choice: str = "auto", names: Iterable[str] = ()
) -> tuple[str, str]:
    """("template" | "scaffold", why) for the model at path ("gguf" file or safetensors folder)."""
    from ember.models.text.base_chat.model_kind import gguf_model_kind, hf_model_kind

    if choice not in CHAT_FORMATS:
        raise TemplateError(f"chat format {choice!r}: choose one of {', '.join(CHAT_FORMATS)}")
    if choice != "auto":
        return choice, "chosen by the chat_format setting"
    if model_format == "gguf":
        from ember.models.files.gguf import open_gguf

        kind = gguf_model_kind(open_gguf(path), names)
    else:
        kind = hf_model_kind(path, names)
    reason = f"{'pretrained' if kind.base else 'instruction-tuned'}: {kind.reason}"
    return ("scaffold" if kind.base else "template"), reason


class ScaffoldChat:
    """Messages -> prompt ids through the few-shot scaffold, plus what the engine adds to every
    scaffolded request: stop strings at the next turn and the reply's leading space dropped.
    Requests with tools, tool turns or template kwargs render through `template` instead (the
    model's TemplateChat; None when the model has no usable template: then they are refused)."""

    kind = "scaffold"
    lstrip_reply = True  # "Assistant:" + " Paris." -> "Paris."

    def __init__(
        self,
        tokenizer: Tokenizer,
        reason: str = "",
        template: Any = None,
        scaffold: Scaffold | None = None,
    ) -> None:
        self.tokenizer = tokenizer
        self.reason = reason
        self.template = template
        self.tool_format: str | None = None if template is None else template.tool_format
        self.scaffold = scaffold or Scaffold()
        self.stop: tuple[str, ...] = self.scaffold.stop

    def __call__(
        self, messages: Sequence[Any], tools: Sequence[Any] = (), template_kwargs: Any = None
    ) -> list[int]:
        """Prompt ids of messages: dicts, or objects with .role and .content (ChatMessage)."""
        if tools or template_kwargs or not scaffolds(messages):
            if self.template is None:
                raise TemplateError("this base model has no chat template for tools")
            return list(self.template(messages, tools, template_kwargs))
        dicts = [
            m if isinstance(m, dict) else {"role": m.role, "content": m.content} for m in messages
        ]
        return self.scaffold.render_ids(self.tokenizer, dicts)


def scaffolds(messages: Sequence[Any]) -> bool:
    """Whether the scaffold can render these turns: no tool results, no tool calls."""
    for m in messages:
        role = m.get("role") if isinstance(m, dict) else m.role
        calls = m.get("tool_calls") if isinstance(m, dict) else getattr(m, "tool_calls", ())
        if role == "tool" or calls:
            return False
    return True
