"""Pick and load a runner for a resolved model (imports each runner lazily).

`auto`: llama.cpp for a GGUF file on the CPU (its kernels are the fastest there for now), torch
for everything else (safetensors folders, CUDA, MPS). `fake` loads the deterministic FakeRunner
(tests and demos without a model file).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ember.engine.errors import EngineError

if TYPE_CHECKING:
    from ember.engine.api import EngineOptions
    from ember.engine.runners.base import Runner

RUNNERS = ("auto", "torch", "llama.cpp", "fake")


@dataclass(frozen=True)
class LocalModel:
    """A model given as a path (used until/unless the registry resolves the reference)."""

    name: str
    path: Path
    format: str  # "gguf" | "safetensors"


def resolve(ref: str) -> Any:
    """The registry's resolution of ref (name, .gguf path or folder), else the path itself."""
    try:
        from ember.models.registry.registry import resolve_model
    except ImportError:
        resolve_model = None
    if resolve_model is not None:
        return resolve_model(ref)
    path = Path(ref).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        return LocalModel(path.stem, path, "gguf")
    if path.is_dir() and (path / "config.json").is_file():
        return LocalModel(path.name, path, "safetensors")
    raise EngineError(f"model {ref!r}: not a .gguf file or a safetensors folder")


def pick_runner(options: EngineOptions, model_format: str) -> str:
    """The runner `auto` means for this model format and device.

    GGUF on the CPU -> llama.cpp (whole engine on the starter model, 1 thread: 11.1 vs 5.3 tok/s
    decode, 86.5 vs 48.4 tok/s prefill against torch; docs/runners.md); safetensors, CUDA and
    MPS -> torch. Remote servers never get here: load_engine routes them to RemoteBackend.
    """
    if options.runner not in RUNNERS:
        raise EngineError(f"runner {options.runner!r}: choose one of {', '.join(RUNNERS)}")
    if options.runner != "auto":
        return options.runner
    on_cpu = options.device in ("auto", "cpu") and not _has_accelerator(options.device)
    if model_format == "gguf" and on_cpu and importlib.util.find_spec("llama_cpp") is not None:
        return "llama.cpp"
    return "torch"


def _has_accelerator(device: str) -> bool:
    if device != "auto":
        return False
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available() or torch.backends.mps.is_available())


def create_runner(options: EngineOptions, resolved: Any) -> Runner:
    """Load the runner options.runner names (or auto picks) for a resolved model."""
    name = pick_runner(options, str(getattr(resolved, "format", "gguf")))
    path = Path(resolved.path)
    if name == "fake":
        from ember.engine.runners.fake import FakeRunner

        return FakeRunner()
    if name == "torch":
        from ember.engine.runners.torch.runner import TorchRunner

        return TorchRunner.load(path, options)
    if model_format_is_not_gguf(resolved):
        raise EngineError(f"model {path}: the llama.cpp runner needs a .gguf file")
    from ember.engine.runners.llamacpp.runner import LlamaCppRunner

    return LlamaCppRunner.load(path, options)


def model_format_is_not_gguf(resolved: Any) -> bool:
    return str(getattr(resolved, "format", "gguf")) != "gguf"


def chat_renderer(resolved: Any, tokenizer: Any, choice: str = "auto") -> Any:
    """The model's ChatFormat: its template, or the base-model scaffold (choice forces one)."""
    from ember.models.text.chat_format import load_chat_format

    model_format = str(getattr(resolved, "format", "gguf"))
    names = [str(getattr(resolved, "name", ""))]
    return load_chat_format(Path(resolved.path), model_format, tokenizer, choice, names)


def load_parts(options: EngineOptions) -> tuple[Runner, Any, str]:
    """The runner, chat renderer and display name for options.model."""
    if options.runner == "fake":
        from ember.engine.runners.fake import FakeRunner, fake_chat_ids

        fake = FakeRunner()
        return fake, (lambda messages: fake_chat_ids(fake.tokenizer, messages)), "fake"
    resolved = resolve(options.model)
    runner = create_runner(options, resolved)
    try:
        chat = chat_renderer(resolved, runner.tokenizer, options.chat_format)
    except Exception:
        runner.close()
        raise
    name = str(getattr(resolved, "name", options.model))
    if not isinstance(resolved, LocalModel):
        from ember.models.registry.registry import mark_used

        mark_used(name)  # `ember list` and the model picker sort by last use
    return runner, chat, name
