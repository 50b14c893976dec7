"""Supported architectures, by GGUF name and by HF model_type."""

from __future__ import annotations

from ember.engine.errors import EngineError
from ember.engine.runners.torch.arch.gemma3 import GEMMA3
from ember.engine.runners.torch.arch.llama import LLAMA
from ember.engine.runners.torch.arch.qwen2 import QWEN2
from ember.engine.runners.torch.arch.qwen3 import QWEN3
from ember.engine.runners.torch.arch.spec import ArchSpec

ARCHS: dict[str, ArchSpec] = {a.name: a for a in (LLAMA, QWEN2, QWEN3, GEMMA3)}
SUPPORTED = tuple(ARCHS)


def arch_for_gguf(name: str, path: object) -> ArchSpec:
    """The spec of a GGUF general.architecture, or EngineError pointing to llama.cpp."""
    if name not in ARCHS:
        raise EngineError(
            f"{path}: architecture {name!r} is not supported by the torch runner "
            f"(supported: {', '.join(SUPPORTED)}); use --runner llama.cpp"
        )
    return ARCHS[name]


def arch_for_hf(model_type: str, path: object) -> ArchSpec:
    """The spec of an HF config.json model_type, or EngineError naming the supported list."""
    for spec in ARCHS.values():
        if model_type in spec.hf_model_types:
            return spec
    raise EngineError(
        f"{path}: model_type {model_type!r} is not supported by the torch runner "
        f"(supported: {', '.join(SUPPORTED)})"
    )
