"""Hugging Face safetensors folders: validated headers, config -> ModelHParams, mmap'd tensors.

Public API:
    open_safetensors(folder) -> SafetensorsModel   config.json, shards (single file or
                                                   model.safetensors.index.json), tokenizer files,
                                                   generation_config.json; ModelFileError on faults
    SafetensorsModel                               folder, config, hparams, architecture, shards,
                                                   entries, tensor_names, tensor(name) -> torch.Tensor,
                                                   dtype_summary, n_params, total_bytes,
                                                   hf_names (how the checkpoint spells the
                                                   decoder's tensors), tokenizer_files,
                                                   tokenizer_config (TokenizerConfig),
                                                   generation_config, chat_template(+_source),
                                                   supported / check_supported()
    refuse_pickle(path)                            ModelFileError for pickle checkpoints (never loaded)
    is_pickle_checkpoint(path) -> bool
    optional_json(path) -> dict                    a JSON object file that may be absent

Tensor names are the checkpoint's own (model.layers.0.self_attn.q_proj.weight ...); shapes are
checked against the hyperparameters for llama, qwen2, qwen3 and gemma3.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ember.models.errors import ModelFileError
from ember.models.files.fields import describe, read_json_file
from ember.models.files.gguf import QuantStat
from ember.models.files.hparams.hparams import SUPPORTED_ARCHS, ModelHParams
from ember.models.files.hparams.tensors import HFNames
from ember.models.files.pickles import is_pickle_checkpoint, refuse_pickle
from ember.models.files.safetensors_header import SafetensorsEntry, read_safetensors_header
from ember.models.files.tokenizer_config import TokenizerConfig, read_tokenizer_config

if TYPE_CHECKING:
    import torch

__all__ = ["SafetensorsModel", "is_pickle_checkpoint", "open_safetensors", "refuse_pickle"]

INDEX_FILE = "model.safetensors.index.json"
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "tokenizer.model",
    "special_tokens_map.json",
    "chat_template.jinja",
)


def _json_object(path: Path, label: str) -> dict[str, Any]:
    data = read_json_file(path, label)
    if not isinstance(data, dict):
        raise ModelFileError(f"{label}: must be a JSON object, got {describe(data)}")
    return data


def _shard_paths(folder: Path) -> tuple[list[Path], dict[str, str] | None]:
    """Shard files in order, and the index's weight map when the model is sharded."""
    index = folder / INDEX_FILE
    if index.exists():
        data = _json_object(index, f"{folder.name}/{INDEX_FILE}")
        weight_map = data.get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise ModelFileError(f"{folder.name}/{INDEX_FILE}: no weight_map")
        names = sorted(set(weight_map.values()), key=str)
        for name in names:
            if (
                not isinstance(name, str)
                or Path(name).name != name
                or not name.endswith(".safetensors")
            ):
                raise ModelFileError(f"{folder.name}/{INDEX_FILE}: bad shard name {name!r}")
            if not (folder / name).is_file():
                raise ModelFileError(
                    f"{folder.name}: missing shard {name} (listed in {INDEX_FILE})"
                )
        return [folder / n for n in names], weight_map
    shards = sorted(folder.glob("*.safetensors"))
    if not shards:
        pickles = [p.name for p in sorted(folder.iterdir()) if is_pickle_checkpoint(p)]
        if pickles:
            refuse_pickle(folder / pickles[0])
        raise ModelFileError(f"{folder.name}: no .safetensors files")
    if len(shards) > 1:
        raise ModelFileError(f"{folder.name}: {len(shards)} .safetensors files but no {INDEX_FILE}")
    return shards, None


def _collect_entries(
    folder: Path, shards: list[Path], weight_map: dict[str, str] | None
) -> dict[str, SafetensorsEntry]:
    entries: dict[str, SafetensorsEntry] = {}
    for shard in shards:
        for name, entry in read_safetensors_header(shard).items():
            if name in entries:
                raise ModelFileError(
                    f"{folder.name}: tensor {name} is in both {entries[name].shard.name} and {shard.name}"
                )
            entries[name] = entry
    for name, shard_name in (weight_map or {}).items():
        listed = entries.get(name)
        if listed is None or listed.shard.name != shard_name:
            raise ModelFileError(
                f"{folder.name}: tensor {name} is not in {shard_name} as the index says"
            )
    return entries


class SafetensorsModel:
    """A validated Hugging Face folder; tensors load lazily through safe_open (mmap)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.config: dict[str, Any] = _json_object(
            folder / "config.json", f"{folder.name}/config.json"
        )
        self.shards, weight_map = _shard_paths(folder)
        self.entries: dict[str, SafetensorsEntry] = _collect_entries(
            folder, self.shards, weight_map
        )
        self.tokenizer_files = {n: folder / n for n in TOKENIZER_FILES if (folder / n).is_file()}
        if "tokenizer.json" not in self.tokenizer_files:
            raise ModelFileError(f"{folder.name}: no tokenizer.json (Ember reads that form)")
        self.tokenizer_config: TokenizerConfig = read_tokenizer_config(folder)
        self.generation_config: dict[str, Any] | None = (
            optional_json(folder / "generation_config.json")
            if (folder / "generation_config.json").is_file()
            else None
        )
        self.chat_template = self.tokenizer_config.chat_template
        self.chat_template_source = self.tokenizer_config.chat_template_source
        self.hf_names = HFNames.of(self.entries)
        self.architecture, self.hparams = _hparams(self)
        self._handles: dict[Path, Any] = {}

    @property
    def tensor_names(self) -> list[str]:
        """All tensor names, in shard order."""
        return list(self.entries)

    @property
    def supported(self) -> bool:
        """Whether the torch runner implements this architecture."""
        return self.hparams is not None and self.architecture in SUPPORTED_ARCHS

    def check_supported(self) -> ModelHParams:
        """The hyperparameters, or ModelFileError when the torch runner cannot run this folder."""
        if self.hparams is None or not self.supported:
            raise ModelFileError(
                f"{self.folder.name}: architecture {self.architecture!r} is not supported "
                f"(supported: {', '.join(SUPPORTED_ARCHS)})"
            )
        quant = self.config.get("quantization_config")
        if quant is not None:  # e.g. Ministral 3's FP8 weights need their scales applied
            method = quant.get("quant_method", "quantized") if isinstance(quant, dict) else "?"
            raise ModelFileError(
                f"{self.folder.name}/config.json: quantization_config: {method} checkpoints "
                "are not supported by the torch runner (use a bf16/fp16/fp32 checkpoint or GGUF)"
            )
        return self.hparams

    @property
    def n_params(self) -> int:
        """Total number of elements over all tensors."""
        return sum(e.n_elements for e in self.entries.values())

    @property
    def total_bytes(self) -> int:
        """Bytes of shards plus config and tokenizer files."""
        extra = [self.folder / "config.json", *self.tokenizer_files.values()]
        if self.generation_config is not None:
            extra.append(self.folder / "generation_config.json")
        return sum(p.stat().st_size for p in [*self.shards, *extra])

    @property
    def dtype_summary(self) -> dict[str, QuantStat]:
        """dtype -> (tensor count, bytes), largest first."""
        stats: dict[str, list[int]] = {}
        for e in self.entries.values():
            entry = stats.setdefault(e.dtype, [0, 0])
            entry[0] += 1
            entry[1] += e.nbytes
        ordered = sorted(stats.items(), key=lambda kv: -kv[1][1])
        return {k: QuantStat(c, b) for k, (c, b) in ordered}

    def tensor(self, name: str) -> torch.Tensor:
        """One tensor, memory-mapped by safetensors (CPU, the checkpoint's dtype)."""
        entry = self.entries.get(name)
        if entry is None:
            raise ModelFileError(f"{self.folder.name}: no tensor {name}")
        handle = self._handles.get(entry.shard)
        if handle is None:
            from safetensors import safe_open

            try:
                handle = safe_open(str(entry.shard), framework="pt", device="cpu")
            except Exception as exc:  # the library's own checks: report, don't crash
                raise ModelFileError(f"{entry.shard.name}: {exc}") from None
            self._handles[entry.shard] = handle
        return handle.get_tensor(name)


def optional_json(path: Path) -> dict[str, Any]:
    """A JSON object file that may be absent ({}); ModelFileError if unreadable or not an object."""
    if not path.is_file():
        return {}
    return _json_object(path, f"{path.parent.name}/{path.name}")


def _hparams(model: SafetensorsModel) -> tuple[str, ModelHParams | None]:
    from ember.models.files.hparams.from_hf import from_hf_config, hf_architecture
    from ember.models.files.hparams.tensors import check_tensor_shapes

    source = f"{model.folder.name}/config.json"
    arch = hf_architecture(model.config, source)
    if arch not in SUPPORTED_ARCHS:
        return arch, None
    hp = from_hf_config(model.config, source)
    text_config = model.config.get("text_config")
    if not any(  # older configs omit the default: the checkpoint's own tensors decide
        isinstance(c, dict) and "tie_word_embeddings" in c for c in (model.config, text_config)
    ):
        hp = dataclasses.replace(hp, tie_embeddings=model.hf_names.head not in model.entries)
    shapes = {n: e.shape for n, e in model.entries.items()}
    try:
        check_tensor_shapes(hp, shapes, model.hf_names)
    except ModelFileError as exc:
        raise ModelFileError(f"{model.folder.name}: {exc}") from None
    return arch, hp


def open_safetensors(folder: str | Path) -> SafetensorsModel:
    """Validate a Hugging Face safetensors folder and return it (tensors stay on disk)."""
    folder = Path(folder)
    if folder.is_file() and folder.suffix == ".safetensors":
        folder = folder.parent
    if not folder.is_dir():
        raise ModelFileError(f"{folder}: no such folder")
    return SafetensorsModel(folder)
