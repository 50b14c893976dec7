"""Hugging Face safetensors folders: validated headers, config -> ModelHParams, mmap'd tensors.

Public API:
    open_safetensors(folder) -> SafetensorsModel   config.json, shards (single file or
                                                   model.safetensors.index.json), tokenizer files,
                                                   generation_config.json; ModelFileError on faults
    SafetensorsModel                               folder, config, hparams, architecture, shards,
                                                   entries, tensor_names, tensor(name) -> torch.Tensor,
                                                   dtype_summary, n_params, total_bytes,
                                                   tokenizer_files, tokenizer_config,
                                                   generation_config, chat_template(+_source),
                                                   supported / check_supported()
    refuse_pickle(path)                            ModelFileError for pickle checkpoints (never loaded)
    is_pickle_checkpoint(path) -> bool

Tensor names are the checkpoint's own (model.layers.0.self_attn.q_proj.weight ...); shapes are
checked against the hyperparameters for llama, qwen2, qwen3 and gemma3.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ember.models.errors import ModelFileError
from ember.models.files.gguf import QuantStat
from ember.models.files.hparams.hparams import SUPPORTED_ARCHS, ModelHParams
from ember.models.files.pickles import is_pickle_checkpoint, refuse_pickle
from ember.models.files.safetensors_header import SafetensorsEntry, read_safetensors_header

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
MAX_JSON_BYTES = 64 * 1024 * 1024


def read_json(path: Path, what: str | None = None) -> Any:
    """Parse a JSON file with a size cap; ModelFileError naming the file on any fault."""
    label = what or path.name
    try:
        if path.stat().st_size > MAX_JSON_BYTES:
            raise ModelFileError(f"{label}: larger than {MAX_JSON_BYTES} bytes")
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ModelFileError(f"{label}: missing") from None
    except (OSError, ValueError, RecursionError) as exc:  # ValueError: bad UTF-8, JSON, huge ints
        raise ModelFileError(f"{label}: not valid JSON ({exc})") from None


def _shard_paths(folder: Path) -> tuple[list[Path], dict[str, str] | None]:
    """Shard files in order, and the index's weight map when the model is sharded."""
    index = folder / INDEX_FILE
    if index.exists():
        data = read_json(index, f"{folder.name}/{INDEX_FILE}")
        weight_map = data.get("weight_map") if isinstance(data, dict) else None
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
        config = read_json(folder / "config.json", f"{folder.name}/config.json")
        if not isinstance(config, dict):
            raise ModelFileError(f"{folder.name}/config.json: not a JSON object")
        self.config: dict[str, Any] = config
        self.shards, weight_map = _shard_paths(folder)
        self.entries: dict[str, SafetensorsEntry] = _collect_entries(
            folder, self.shards, weight_map
        )
        self.tokenizer_files = {n: folder / n for n in TOKENIZER_FILES if (folder / n).is_file()}
        if "tokenizer.json" not in self.tokenizer_files:
            raise ModelFileError(f"{folder.name}: no tokenizer.json (Ember reads that form)")
        self.tokenizer_config: dict[str, Any] = optional_json(folder / "tokenizer_config.json")
        self.generation_config: dict[str, Any] | None = (
            optional_json(folder / "generation_config.json")
            if (folder / "generation_config.json").is_file()
            else None
        )
        self.chat_template, self.chat_template_source = _chat_template(self)
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
    data = read_json(path, f"{path.parent.name}/{path.name}")
    if not isinstance(data, dict):
        raise ModelFileError(f"{path.parent.name}/{path.name}: not a JSON object")
    return data


def _chat_template(model: SafetensorsModel) -> tuple[str | None, str | None]:
    """The template text and where it came from, or (None, None)."""
    jinja = model.folder / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text(encoding="utf-8", errors="replace"), "chat_template.jinja"
    template = model.tokenizer_config.get("chat_template")
    if isinstance(template, list):  # [{"name": "default", "template": ...}, ...]
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default")
    if isinstance(template, str) and template:
        return template, "tokenizer_config.json"
    return None, None


def _hparams(model: SafetensorsModel) -> tuple[str, ModelHParams | None]:
    from ember.models.files.hparams.from_hf import from_hf_config, hf_architecture
    from ember.models.files.hparams.tensors import check_tensor_shapes

    name = model.folder.name
    try:
        arch = hf_architecture(model.config)
    except ModelFileError as exc:
        raise ModelFileError(f"{name}: {exc}") from None
    if arch not in SUPPORTED_ARCHS:
        return arch, None
    try:
        hp = from_hf_config(model.config)
        if "tie_word_embeddings" not in model.config:  # older configs omit the default
            hp = dataclasses.replace(hp, tie_embeddings="lm_head.weight" not in model.entries)
        shapes = {n: e.shape for n, e in model.entries.items()}
        check_tensor_shapes(hp, shapes, hf_names=True)
    except ModelFileError as exc:
        raise ModelFileError(f"{name}: {exc}") from None
    return arch, hp


def open_safetensors(folder: str | Path) -> SafetensorsModel:
    """Validate a Hugging Face safetensors folder and return it (tensors stay on disk)."""
    folder = Path(folder)
    if folder.is_file() and folder.suffix == ".safetensors":
        folder = folder.parent
    if not folder.is_dir():
        raise ModelFileError(f"{folder}: no such folder")
    return SafetensorsModel(folder)


def token_text(value: object) -> str | None:
    """A special token as tokenizer_config.json spells it: a string or {"content": ...}."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None
