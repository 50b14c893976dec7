"""A request's prompt ids: the chat template (or base-model scaffold) over its messages, its raw
text, or the ids it gave; the grammar that forces a tool call; the ids that end its reply.

The Engine holds one PromptEncoder per loaded model. It refuses ids outside the vocabulary; tool
specs, tool-call arguments and template kwargs that spell a special token are rendered as plain
text by the chat template (models/text/templates/segments.py), never refused here.
"""

from __future__ import annotations

from collections.abc import Callable

from ember.engine.api import ConstraintSpec, GenerationRequest
from ember.engine.errors import EngineError
from ember.engine.json_schema import prepare_schema
from ember.models.text.tokenizers.base import Tokenizer

# messages -> prompt ids; renderers that take tools (and template kwargs) also have a
# tool_format attribute (runners/factory.py TemplateChat, fake.py FakeChat)
ChatRenderer = Callable[..., list[int]]


class PromptEncoder:
    """Requests -> prompt ids for one model (its tokenizer, chat renderer and tool format)."""

    def __init__(
        self,
        tokenizer: Tokenizer,
        chat: ChatRenderer | None,
        *,
        vocab_size: int,
        model_name: str,
        tool_format: str,
    ) -> None:
        self.tokenizer = tokenizer
        self.chat = chat
        self.vocab_size = vocab_size
        self.model_name = model_name
        self.tool_format = tool_format

    def encode(self, request: GenerationRequest) -> list[int]:
        """The prompt token ids of a request (chat template, raw text or given ids)."""
        if request.prompt_ids is not None:
            ids = list(request.prompt_ids)
        elif request.prompt is not None and request.suffix is not None:
            ids = self._fim_prompt(request.prompt, request.suffix)
        elif request.prompt is not None:
            add_bos = self.tokenizer.add_bos if request.add_bos is None else request.add_bos
            ids = self.tokenizer.encode(request.prompt, add_bos=add_bos, parse_special=True)
        else:
            ids = self._render_chat(request)
        if request.context_ids:
            ids = self._continue(request.context_ids, ids)
        if not ids:
            raise EngineError("request: the prompt is empty")
        vocab = self.vocab_size
        if any(not 0 <= t < vocab for t in ids):
            raise EngineError(f"request: token ids must be in [0, {vocab})")
        return ids

    def _continue(self, context: tuple[int, ...], ids: list[int]) -> list[int]:
        """context + ids, less the BOS that starts ids (the context began the sequence)."""
        vocab = self.vocab_size
        if (bad := next((t for t in context if not 0 <= t < vocab), None)) is not None:
            raise EngineError(f"request context_ids: {bad} is outside the vocabulary ({vocab})")
        bos = self.tokenizer.bos_id
        if ids and bos is not None and ids[0] == bos:
            ids = ids[1:]
        return [*context, *ids]

    def _fim_prompt(self, prefix: str, suffix: str) -> list[int]:
        from ember.models.text.fim import fim_prompt, fim_tokens

        tokens = fim_tokens(self.tokenizer)
        if tokens is None:
            raise EngineError(
                f"model {self.model_name} has no fill-in-the-middle tokens: suffix and /infill "
                "need a code model trained for FIM"
            )
        return fim_prompt(self.tokenizer, tokens, prefix, suffix)

    def _render_chat(self, request: GenerationRequest) -> list[int]:
        if self.chat is None:
            raise EngineError(f"model {self.model_name} has no chat template: use a raw prompt")
        messages = request.messages or ()
        if not self.takes_tool_path(request):
            return list(self.chat(messages))
        if getattr(self.chat, "tool_format", None) is None:
            raise EngineError(f"model {self.model_name}: its chat renderer takes no tools")
        return list(
            self.chat(
                messages, tools=request.offered_tools, template_kwargs=request.template_kwargs
            )
        )

    @staticmethod
    def takes_tool_path(request: GenerationRequest) -> bool:
        """Tools, tool turns or template kwargs: rendered through the model's template (also
        for a base model: models/text/chat_format.py), so no scaffold stops or lstrip."""
        tool_turns = any(m.role == "tool" or m.tool_calls for m in request.messages or ())
        return bool(request.offered_tools or request.template_kwargs or tool_turns)

    def tool_constraint(self, request: GenerationRequest) -> ConstraintSpec | None:
        """The grammar of a forced tool call (tool_choice required or named), else None."""
        if not request.forces_tool_call:
            return None
        from ember.models.text.tool_calls import tool_call_grammar, tool_format

        tools = [t.as_dict() for t in request.tools]
        if request.tool_choice != "required":
            tools = [t for t in tools if t["name"] == request.tool_choice]
        fmt = tool_format(self.tool_format)
        # each tool's parameters checked and bounded like a response schema (json_schema.py)
        tools = [t | {"parameters": prepare_schema(t["parameters"], "tools")} for t in tools]
        return ConstraintSpec("lark", tool_call_grammar(tools, fmt, self._special_id))

    def _special_id(self, text: str) -> int | None:
        ids = self.tokenizer.encode(text, parse_special=True)
        return ids[0] if len(ids) == 1 and ids[0] in self.tokenizer.special_ids else None

    def stop_ids(self, request: GenerationRequest) -> frozenset[int]:
        ids = set(request.sampling.stop_token_ids)
        if not request.sampling.ignore_eos:
            ids |= set(self.tokenizer.eot_ids)
            if self.tokenizer.eos_id is not None:
                ids.add(self.tokenizer.eos_id)
        return frozenset(ids)
