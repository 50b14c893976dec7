"""How a model's conversations become prompt ids: its chat template, or the base-model scaffold.

`load_chat_format` makes the choice once per loaded model: `auto` asks base_chat.model_kind
whether the model is pretrained (then the scaffold) or instruction-tuned (then its template);
`template` and `scaffold` force one. The engine, and so the TUI, `ember run` and the server,
all render through the ChatFormat they are given.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ember.models.errors import TemplateError

if TYPE_CHECKING:
    from ember.models.text.tokenizers.base import Tokenizer

CHAT_FORMATS = ("auto", "template", "scaffold")
Messages = Sequence[dict[str, Any]]


@dataclass(frozen=True)
class ChatFormat:
    """A messages -> prompt ids function plus what the engine must add to every chat request."""

    kind: str  # "template" | "scaffold"
    render_ids: Callable[[Messages], list[int]]
    stop: tuple[str, ...] = ()  # stop strings added to each request (the scaffold's next turn)
    lstrip_reply: bool = False  # drop the reply's leading whitespace ("Assistant:" + " Paris")
    reason: str = ""  # why this kind was chosen

    def __call__(self, messages: Sequence[Any]) -> list[int]:
        """Prompt ids of messages: dicts, or objects with .role and .content (ChatMessage)."""
        dicts = [
            m if isinstance(m, dict) else {"role": m.role, "content": m.content} for m in messages
        ]
        return self.render_ids(dicts)


def load_chat_format(
    path: Path,
    model_format: str,
    tokenizer: Tokenizer,
    choice: str = "auto",
    names: Iterable[str] = (),
) -> ChatFormat:
    """The ChatFormat of the model at path ("gguf" file or "safetensors" folder)."""
    from ember.models.text.base_chat.model_kind import gguf_model_kind, hf_model_kind

    if choice not in CHAT_FORMATS:
        raise TemplateError(f"chat format {choice!r}: choose one of {', '.join(CHAT_FORMATS)}")
    if choice == "auto":
        if model_format == "gguf":
            from ember.models.files.gguf import open_gguf

            kind = gguf_model_kind(open_gguf(path), names)
        else:
            kind = hf_model_kind(path, names)
        choice = "scaffold" if kind.base else "template"
        reason = f"{'pretrained' if kind.base else 'instruction-tuned'}: {kind.reason}"
    else:
        reason = "chosen by the chat_format setting"
    if choice == "scaffold":
        return scaffold_format(tokenizer, reason)
    return template_format(path, model_format, tokenizer, reason)


def scaffold_format(tokenizer: Tokenizer, reason: str = "") -> ChatFormat:
    from ember.models.text.base_chat.scaffold import Scaffold

    scaffold = Scaffold()
    return ChatFormat(
        "scaffold",
        lambda messages: scaffold.render_ids(tokenizer, messages),
        stop=scaffold.stop,
        lstrip_reply=True,
        reason=reason,
    )


def template_format(
    path: Path, model_format: str, tokenizer: Tokenizer, reason: str = ""
) -> ChatFormat:
    from ember.models.text.templates.chat_template import ChatTemplate

    template = (
        ChatTemplate.from_gguf(path) if model_format == "gguf" else ChatTemplate.from_hf(path)
    )
    return ChatFormat(
        "template",
        lambda messages: list(template.render_ids(tokenizer, list(messages))),
        reason=reason,
    )
