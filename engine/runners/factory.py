"""Pick and load a runner for a model app resolved (imports each runner lazily).

The engine never resolves a model reference itself: app (app/loading.py) turns a registry
name, alias or path into a ModelFiles (path, format, digest) and hands it down.

`auto`: for a GGUF file on the CPU, llama.cpp or torch, whichever decodes faster on this machine
for this model (measured on its first load and cached: runner_choice.py); torch for everything
else (safetensors folders, CUDA, MPS). `fake` loads the deterministic FakeRunner (tests and demos
without a model file).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ember.engine.errors import EngineError

if TYPE_CHECKING:
    from ember.engine.api import ChatMessage, EngineOptions, ModelFiles
    from ember.engine.prompt import ChatRenderer
    from ember.engine.runners.base import Runner
    from ember.models.text.tokenizers.base import Tokenizer

RUNNERS = ("auto", "torch", "llama.cpp", "fake")
MEASURED = "measured"  # pick_runner: llama.cpp or torch, decided by runner_choice.py


def pick_runner(options: EngineOptions, model_format: str) -> str:
    """The runner options.runner means for this model format and device, or MEASURED.

    auto: GGUF on the CPU with llama-cpp-python installed -> MEASURED (whichever of llama.cpp and
    torch decodes this model faster here: runner_choice.py); safetensors, CUDA and MPS -> torch.
    Remote servers never get here: load_engine routes them to RemoteBackend.
    """
    if options.runner not in RUNNERS:
        raise EngineError(f"runner {options.runner!r}: choose one of {', '.join(RUNNERS)}")
    if options.runner != "auto":
        return options.runner
    on_cpu = options.device in ("auto", "cpu") and not _has_accelerator(options.device)
    if model_format == "gguf" and on_cpu and importlib.util.find_spec("llama_cpp") is not None:
        return MEASURED
    return "torch"


def _has_accelerator(device: str) -> bool:
    if device != "auto":
        return False
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available() or torch.backends.mps.is_available())


def create_runner(options: EngineOptions, model: ModelFiles) -> Runner:
    """Load the runner options.runner names (or auto picks) for a resolved model."""
    name = pick_runner(options, model.format)
    if name == MEASURED:
        from ember.engine.runners.runner_choice import choose_runner

        return choose_runner(options, model, lambda chosen, opts: load_runner(chosen, opts, model))
    return load_runner(name, options, model)


def load_runner(name: str, options: EngineOptions, model: ModelFiles) -> Runner:
    """Load the named runner (torch, llama.cpp or fake) for a resolved model."""
    if name == "fake":
        from ember.engine.runners.fake import FakeRunner

        return FakeRunner()
    if name == "torch":
        from ember.engine.runners.torch.kv_choice import torch_kv_dtype

        torch_kv_dtype(options.kv_cache)  # refuse q4 before torch is imported or a file read
        from ember.engine.runners.torch.runner import TorchRunner

        return TorchRunner.load(model.path, options, digest=model.digest)
    if model.format != "gguf":
        raise EngineError(f"model {model.path}: the llama.cpp runner needs a .gguf file")
    from ember.engine.runners.llamacpp.runner import LlamaCppRunner

    return LlamaCppRunner.load(model.path, options, digest=model.digest)


class TemplateChat:
    """Messages (with tools and template kwargs) -> prompt ids through a model's chat template;
    tool turns in the model's own format or Ember's generic one (models/text/tool_calls)."""

    kind = "template"

    def __init__(self, template: Any, tokenizer: Tokenizer, reason: str = "") -> None:
        from ember.models.text.tool_calls import detect_tool_format

        self.template = template
        self.tokenizer = tokenizer
        self.tool_format = detect_tool_format(template.source).name
        self.thinking_switch = "enable_thinking" in (template.source or "")
        self.reason = reason  # why the template and not the base-model scaffold

    def __call__(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[Any] = (),
        template_kwargs: Any = None,
    ) -> list[int]:
        from ember.models.text.tool_calls import template_inputs, tool_format

        dicts = [m.template_dict() for m in messages]
        specs = [t.as_dict() for t in tools]
        dicts, rendered_tools = template_inputs(dicts, specs, tool_format(self.tool_format))
        extra = dict(template_kwargs or {})
        if rendered_tools:
            extra["tools"] = rendered_tools
        return list(self.template.render_ids(self.tokenizer, dicts, **extra))


def chat_renderer(model: ModelFiles, tokenizer: Tokenizer, choice: str = "auto") -> ChatRenderer:
    """The model's renderer: its chat template (takes tools), or for a pretrained model the
    few-shot scaffold (models/text/chat_format.py); choice ("template"/"scaffold") forces one."""
    from ember.models.errors import TemplateError
    from ember.models.text.chat_format import ScaffoldChat, choose_chat_format
    from ember.models.text.templates.chat_template import ChatTemplate

    kind, reason = choose_chat_format(model.path, model.format, choice, [model.name])
    is_gguf = model.format == "gguf"
    try:
        template = TemplateChat(
            ChatTemplate.from_gguf(model.path) if is_gguf else ChatTemplate.from_hf(model.path),
            tokenizer,
            reason,
        )
    except TemplateError:
        if kind != "scaffold":
            raise
        template = None  # the scaffold chats; tool requests are refused
    if kind == "scaffold":
        # tools, tool turns and template kwargs still render through the template
        return ScaffoldChat(tokenizer, reason, template)
    assert template is not None
    return template


def load_parts(
    options: EngineOptions, model: ModelFiles | None
) -> tuple[Runner, ChatRenderer, str]:
    """The runner, chat renderer and display name of a resolved model (None: the fake runner)."""
    if options.runner == "fake":
        from ember.engine.runners.fake import FakeChat, FakeRunner

        fake = FakeRunner()
        return fake, FakeChat(fake.tokenizer), "fake"
    if model is None:
        raise EngineError(f"model {options.model!r}: not resolved (app resolves model references)")
    runner = create_runner(options, model)
    try:
        chat = chat_renderer(model, runner.tokenizer, options.chat_format)
    except Exception:
        runner.close()
        raise
    return runner, chat, model.name
