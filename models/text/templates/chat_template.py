"""A model's chat template, rendered in a limited Jinja sandbox; user text never becomes control.

`ChatTemplate.from_gguf(path)` / `.from_hf(folder)` use the model's own template and fall back to
a built-in one (Gemma turns for gemma architectures, ChatML otherwise); `template_source` says
which. `render_ids` tokenizes the template's own markup with special tokens parsed and all
client text without (message content, tools, tool calls, template kwargs: segments.py), so a user
typing `<start_of_turn>`, or an MCP server describing a tool with it, gets plain-text ids.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ember.models.errors import TemplateError
from ember.models.files.safetensors import optional_json
from ember.models.files.tokenizer_config import read_tokenizer_config
from ember.models.text.templates.sandbox import (
    LimitedEnvironment,
    TemplateLimits,
    TemplateRaised,
    limit_error,
    render_limited,
)
from ember.models.text.templates.segments import Segment, split_segments
from ember.models.text.templates.system_fold import TemplateRefused, fold_system

if TYPE_CHECKING:
    from jinja2 import Template

    from ember.models.files.gguf import GGUFModel
    from ember.models.files.safetensors import SafetensorsModel
    from ember.models.text.tokenizers.base import Tokenizer

log = logging.getLogger(__name__)
_WINDOW, _OVERLAP = 4096, 256  # special-token spellings are far shorter than the overlap
CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

# Gemma's turn format: system text joins the first user turn, the assistant role is "model".
GEMMA = (
    "{{ bos_token }}"
    "{% if messages and messages[0]['role'] == 'system' %}"
    "{% set first_user_prefix = messages[0]['content'] | trim + '\n\n' %}"
    "{% set loop_messages = messages[1:] %}"
    "{% else %}{% set first_user_prefix = '' %}{% set loop_messages = messages %}{% endif %}"
    "{% for message in loop_messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{% endif %}"
    "{% set role = 'model' if message['role'] == 'assistant' else message['role'] %}"
    "{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else '') }}"
    "{{ message['content'] | trim }}<end_of_turn>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif %}"
)


@dataclass
class ChatTemplate:
    """A compiled chat template plus the variables it expects (bos_token, eos_token)."""

    source: str
    template_source: (
        str  # "gguf metadata", "tokenizer_config.json", "built-in gemma" or "built-in chatml"
    )
    bos_token: str = ""
    eos_token: str = ""
    limits: TemplateLimits = field(default_factory=TemplateLimits)

    def __post_init__(self) -> None:
        if len(self.source) > self.limits.max_source_chars:
            raise TemplateError(
                f"chat template of {len(self.source)} characters exceeds {self.limits.max_source_chars}"
            )
        self._env = LimitedEnvironment(self.limits)
        try:
            self._template: Template = self._env.from_string(self.source)
        except Exception as exc:  # jinja2.TemplateSyntaxError and friends
            raise TemplateError(
                f"chat template ({self.template_source}) does not compile: {exc}"
            ) from exc

    @classmethod
    def for_architecture(cls, arch: str, bos_token: str = "", eos_token: str = "") -> ChatTemplate:
        """The built-in template for a model without one: Gemma turns for gemma*, harmony for
        gpt-oss, else ChatML."""
        from ember.models.text.harmony.template import HARMONY_TEMPLATE, is_harmony_architecture

        if is_harmony_architecture(arch):
            return cls(HARMONY_TEMPLATE, "built-in harmony", bos_token, eos_token)
        if arch.lower().startswith("gemma"):
            return cls(GEMMA, "built-in gemma", bos_token or "<bos>", eos_token or "<eos>")
        return cls(CHATML, "built-in chatml", bos_token, eos_token)

    @classmethod
    def from_gguf(cls, model: GGUFModel | Path | str) -> ChatTemplate:
        """The GGUF model's tokenizer.chat_template, or the built-in one for its architecture."""
        from ember.models.files.gguf import GGUFModel, open_gguf

        gguf = model if isinstance(model, GGUFModel) else open_gguf(model)
        bos, eos = _gguf_token_texts(gguf)
        source = gguf.chat_template
        if isinstance(source, str) and source.strip():
            return cls(source, "gguf metadata", bos, eos)
        return cls.for_architecture(gguf.architecture, bos, eos)

    @classmethod
    def from_hf(cls, model: SafetensorsModel | Path | str) -> ChatTemplate:
        """The folder's chat_template.jinja or tokenizer_config.json template, else a built-in."""
        folder = Path(model) if isinstance(model, str | Path) else model.folder
        config = read_tokenizer_config(folder)  # typed; the template file's UTF-8 checked
        bos, eos = config.bos_token or "", config.eos_token or ""
        if config.chat_template is not None and config.chat_template_source is not None:
            return cls(config.chat_template, config.chat_template_source, bos, eos)
        model_type = optional_json(folder / "config.json").get("model_type")
        return cls.for_architecture(model_type if isinstance(model_type, str) else "", bos, eos)

    def render(
        self, messages: list[dict[str, Any]], add_generation_prompt: bool = True, **extra: Any
    ) -> str:
        """The conversation as the model's prompt text."""
        return self._folding(
            lambda msgs: self._render(msgs, add_generation_prompt, extra), messages
        )

    def render_segments(
        self, messages: list[dict[str, Any]], add_generation_prompt: bool = True, **extra: Any
    ) -> list[Segment]:
        """The rendered prompt split into template markup and client text (message content,
        tools, tool calls, kwargs); with no tokenizer to ask which strings spell a special
        token, a template that transforms tools or kwargs is refused."""
        return self._segments(messages, add_generation_prompt, extra, None)

    def _segments(
        self,
        messages: list[dict[str, Any]],
        add_generation_prompt: bool,
        extra: dict[str, Any],
        spells_special: Callable[[str], bool] | None,
    ) -> list[Segment]:
        # tools and kwargs are client text like message content: segments.py marks them
        return self._folding(
            lambda msgs: split_segments(
                lambda marked, kw: self._render(marked, add_generation_prompt, kw),
                msgs,
                extra,
                spells_special,
                self.limits.max_chars,
            ),
            messages,
        )

    def _folding(self, render: Callable[[list[dict[str, Any]]], Any], messages: list) -> Any:
        """render(messages); when the template refuses and they start with a system message,
        render again with it folded into the first user turn (system_fold.py)."""
        try:
            return render(messages)
        except TemplateRefused:
            folded = fold_system(messages)
            if folded is None:
                raise
        log.info(
            "chat template (%s) refused a system role: folded it into the first user turn",
            self.template_source,
        )
        return render(folded)

    def render_ids(
        self,
        tokenizer: Tokenizer,
        messages: list[dict[str, Any]],
        add_generation_prompt: bool = True,
        **extra: Any,
    ) -> list[int]:
        """Prompt ids: markup with special tokens parsed; message content, tools, tool calls
        and template kwargs as plain text."""
        special = tokenizer.special_ids

        def spells_special(text: str) -> bool:
            # in overlapping 4 Ki windows: tokenizing text full of special spellings at once
            # grows faster than linearly (64 Ki chars 0.7 s, 256 Ki 8 s), and one hit answers
            for start in range(0, max(len(text), 1), _WINDOW):
                piece = text[start : start + _WINDOW + _OVERLAP]
                if not special.isdisjoint(tokenizer.encode(piece, parse_special=True)):
                    return True
            return False

        ids: list[int] = []
        for segment in self._segments(messages, add_generation_prompt, extra, spells_special):
            ids += tokenizer.encode(segment.text, parse_special=segment.from_template)
        if tokenizer.add_bos and tokenizer.bos_id is not None and ids[:1] != [tokenizer.bos_id]:
            ids.insert(0, tokenizer.bos_id)  # the template did not write BOS itself
        return ids

    def _render(
        self, messages: list[dict[str, Any]], add_generation_prompt: bool, extra: dict
    ) -> str:
        context = {
            **extra,
            "messages": messages,
            "add_generation_prompt": add_generation_prompt,
            "bos_token": self.bos_token,
            "eos_token": self.eos_token,
        }
        try:
            return render_limited(self._template.generate(**context), self.limits)
        except TemplateRaised as exc:
            raise TemplateRefused(f"chat template ({self.template_source}) refused: {exc}") from exc
        except Exception as exc:  # SecurityError, UndefinedError, TypeError... all end the same way
            raise limit_error(exc) or TemplateError(
                f"chat template ({self.template_source}) failed: {type(exc).__name__}: {exc}"
            ) from exc


def _gguf_token_texts(gguf: GGUFModel) -> tuple[str, str]:
    """The BOS and EOS token spellings of a GGUF vocabulary ("" when absent)."""
    ids = (gguf.tokenizer.bos_id, gguf.tokenizer.eos_id)
    if all(i is None for i in ids) or gguf.array_count("tokenizer.ggml.tokens") is None:
        return "", ""
    tokens = gguf.metadata_array("tokenizer.ggml.tokens")
    texts = [str(tokens[i]) if i is not None and 0 <= i < len(tokens) else "" for i in ids]
    return texts[0], texts[1]
