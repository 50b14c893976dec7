"""What a model file or folder is, in one small record: the data behind `ember show` / `ember list`.

Public API:
    inspect_model(path) -> ModelInfo     a .gguf file or a Hugging Face safetensors folder
    ModelInfo                            format, architecture, parameters, quant mix, context
                                         length, file size, path, chat template source; to_dict()
    builtin_template_name(arch) -> str   "gemma" for gemma architectures, else "chatml"

No SHA-256 here: hashing 250 MB+ is the registry's job, done once and stored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ember.models.errors import ModelFileError

TEMPLATE_SOURCES = (
    "gguf metadata",
    "tokenizer_config.json",
    "chat_template.jinja",
    "built-in gemma",
    "built-in chatml",
)


@dataclass(frozen=True)
class ModelInfo:
    """A model's identity card (no digest: the registry adds that)."""

    path: Path
    format: str  # "gguf" | "safetensors"
    name: str
    architecture: str
    supported: bool  # the torch runner implements the architecture
    n_params: int
    quant: str  # the file's quantization label (GGUF file type like Q4_K_M, else the main type)
    quant_mix: dict[str, int]  # tensor type (Q4_K, F32, BF16, ...) -> bytes, largest first
    context_length: int | None
    file_size: int  # bytes of all model files (GGUF file, or shards + config/tokenizer files)
    chat_template_source: str  # one of TEMPLATE_SOURCES
    n_layers: int | None = None
    hidden_size: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # format-specific facts for --json

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict for --json (parameters = n_params, size_bytes = file_size)."""
        return {
            "path": str(self.path),
            "format": self.format,
            "model_name": self.name,  # the file's own name; "name" is the registry's
            "architecture": self.architecture,
            "supported": self.supported,
            "parameters": self.n_params,
            "quant": self.quant,
            "quant_mix": dict(self.quant_mix),
            "context_length": self.context_length,
            "size_bytes": self.file_size,
            "chat_template_source": self.chat_template_source,
            "n_layers": self.n_layers,
            "hidden_size": self.hidden_size,
            **self.extra,
        }


def builtin_template_name(architecture: str) -> str:
    """Which built-in chat format stands in when a model has no template."""
    return "gemma" if architecture.startswith("gemma") else "chatml"


def _gguf_quant_label(file_type: object, quant_mix: dict[str, int]) -> str:
    """general.file_type as llama.cpp names it (15 -> Q4_K_M), else the type with most bytes."""
    from gguf import LlamaFileType

    if isinstance(file_type, int) and not isinstance(file_type, bool):
        try:
            return LlamaFileType(file_type).name.removeprefix("MOSTLY_").removeprefix("ALL_")
        except ValueError:
            pass
    return next(iter(quant_mix), "unknown")


def _gguf_info(path: Path) -> ModelInfo:
    from ember.models.files.gguf import open_gguf

    model = open_gguf(path)
    hp = model.hparams
    context = (
        hp.context_length if hp else model.metadata.get(f"{model.architecture}.context_length")
    )
    source = (
        "gguf metadata"
        if model.chat_template
        else f"built-in {builtin_template_name(model.architecture)}"
    )
    quant_mix = {name: stat.nbytes for name, stat in model.quant_summary.items()}
    file_type = model.metadata.get("general.file_type")
    return ModelInfo(
        path=path,
        format="gguf",
        name=model.name,
        architecture=model.architecture,
        supported=model.supported,
        n_params=model.n_params,
        quant=_gguf_quant_label(file_type, quant_mix),
        quant_mix=quant_mix,
        context_length=context if isinstance(context, int) else None,
        file_size=model.file_size,
        chat_template_source=source,
        n_layers=hp.n_layers if hp else None,
        hidden_size=hp.hidden_size if hp else None,
        extra={
            "gguf_version": model.version,
            "n_tensors": len(model.tensors),
        },
    )


def _safetensors_info(path: Path) -> ModelInfo:
    from ember.models.files.safetensors import open_safetensors

    model = open_safetensors(path)
    hp = model.hparams
    source = model.chat_template_source or f"built-in {builtin_template_name(model.architecture)}"
    context = model.config.get("max_position_embeddings")
    quant_mix = {name: stat.nbytes for name, stat in model.dtype_summary.items()}
    return ModelInfo(
        path=model.folder,
        format="safetensors",
        name=model.folder.name,
        architecture=model.architecture,
        supported=model.supported,
        n_params=model.n_params,
        quant=next(iter(quant_mix), "unknown"),
        quant_mix=quant_mix,
        context_length=hp.context_length if hp else context if isinstance(context, int) else None,
        file_size=model.total_bytes,
        chat_template_source=source,
        n_layers=hp.n_layers if hp else None,
        hidden_size=hp.hidden_size if hp else None,
        extra={"n_shards": len(model.shards), "n_tensors": len(model.tensor_names)},
    )


def inspect_model(path: str | Path) -> ModelInfo:
    """Open and validate a .gguf file or a safetensors folder and describe it."""
    path = Path(path)
    if path.is_dir():
        return _safetensors_info(path)
    if not path.exists():
        raise ModelFileError(f"{path}: no such file or folder")
    if path.suffix.lower() == ".safetensors":
        return _safetensors_info(path.parent)
    from ember.models.files.safetensors import refuse_pickle

    refuse_pickle(path)
    return _gguf_info(path)
