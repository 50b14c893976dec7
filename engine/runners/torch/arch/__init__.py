"""The architectures the torch runner builds, by ModelHParams.architecture."""

from __future__ import annotations

from ember.engine.errors import EngineError
from ember.engine.runners.torch.arch.dense2026 import DENSE_2026
from ember.engine.runners.torch.arch.gemma3 import GEMMA3
from ember.engine.runners.torch.arch.llama import LLAMA
from ember.engine.runners.torch.arch.qwen2 import QWEN2
from ember.engine.runners.torch.arch.qwen3 import QWEN3
from ember.engine.runners.torch.arch.qwen3moe import QWEN3MOE
from ember.engine.runners.torch.arch.spec import ArchSpec

ARCHS: dict[str, ArchSpec] = {a.name: a for a in (LLAMA, QWEN2, QWEN3, GEMMA3, QWEN3MOE)}
ARCHS |= {a.name: a for a in DENSE_2026}
SUPPORTED = tuple(ARCHS)


def arch_spec(name: str, path: object) -> ArchSpec:
    """The spec of an architecture, or EngineError naming the supported list."""
    if name not in ARCHS:
        raise EngineError(
            f"{path}: architecture {name!r} is not supported by the torch runner "
            f"(supported: {', '.join(SUPPORTED)}); use --runner llama.cpp for GGUF files"
        )
    return ARCHS[name]
