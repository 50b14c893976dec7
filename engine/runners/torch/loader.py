"""Open a model (GGUF file or HF safetensors folder) as a config plus named weight tensors.

Both formats open through models/files (open_gguf, open_safetensors): the same bounded header
checks, pickle refusal and validated ModelHParams as `ember show`. The runner's config is a
mapping of that description (config.py); nothing here reads metadata itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ember.engine.runners.torch.arch import arch_spec
from ember.engine.runners.torch.arch.spec import ArchSpec
from ember.engine.runners.torch.config import ModelConfig, model_config
from ember.engine.runners.torch.weights import F32, WeightTensor
from ember.models.errors import ModelFileError

if TYPE_CHECKING:
    import torch

    from ember.models.files.hparams.hparams import ModelHParams
    from ember.models.files.safetensors import SafetensorsModel


@dataclass
class ModelSource:
    """A model's description, config and tensors under GGUF names, plus where it came from."""

    path: Path
    kind: str  # "gguf" | "safetensors"
    spec: ArchSpec
    hparams: ModelHParams
    config: ModelConfig
    tensors: dict[str, WeightTensor]
    digest: str  # the content digest app resolved (ModelFiles.digest); "" = none given
    keepalive: Any = None  # the opened model whose mmaps back the tensors


def open_model(path: str | Path, digest: str = "") -> ModelSource:
    """Validate a GGUF file or an HF folder and read its header; tensors stay on disk until used."""
    path = Path(path)
    if path.is_dir() or (path.suffix.lower() == ".safetensors" and path.is_file()):
        return _open_safetensors(path, digest)
    if not path.exists():
        raise ModelFileError(f"{path}: no such model file or folder")
    from ember.models.files.pickles import refuse_pickle

    refuse_pickle(path)  # a .bin/.pt given as the model: refused by name or content, never read
    return _open_gguf(path, digest)


def _open_gguf(path: Path, digest: str) -> ModelSource:
    from ember.models.files.gguf import open_gguf

    model = open_gguf(path)  # bounded header check; tensors are zero-copy mmap views
    hp = model.check_supported()
    spec = arch_spec(hp.architecture, path)
    tensors = {
        name: WeightTensor(name, tuple(t.shape), int(t.qtype), raw=t.raw)
        for name, t in model.tensors.items()
    }
    if hp.is_moe:  # before any tensor is touched: pages of unchosen experts stay unread
        from ember.engine.runners.torch.residency import advise_moe

        advise_moe({name: t.raw for name, t in tensors.items()}, path)
    config = model_config(hp, spec)
    return ModelSource(path, "gguf", spec, hp, config, tensors, digest, keepalive=model)


def _open_safetensors(path: Path, digest: str) -> ModelSource:
    from ember.models.files.hparams.tensors import gguf_tensor_name
    from ember.models.files.safetensors import open_safetensors

    model = open_safetensors(path)  # bounded header checks, pickle refusal, config validated
    hp = model.check_supported()
    spec = arch_spec(hp.architecture, model.folder)
    tensors: dict[str, WeightTensor] = {}
    for hf_name, entry in model.entries.items():
        name = gguf_tensor_name(hf_name, hp.architecture, model.hf_names)
        if name is not None:
            tensors[name] = WeightTensor(name, entry.shape, F32, load=_loader(model, hf_name))
    if hp.is_moe:
        tensors |= _expert_stacks(model, hp)
    config = model_config(hp, spec)
    return ModelSource(
        model.folder, "safetensors", spec, hp, config, tensors, digest, keepalive=model
    )


def _expert_stacks(model: SafetensorsModel, hp: ModelHParams) -> dict[str, WeightTensor]:
    """GGUF's stacked expert tensors over a checkpoint's per-expert matrices (each expert read
    on its own when the runner first uses it)."""
    from ember.models.files.hparams.tensors import expected_tensors, hf_expert_names

    stacks: dict[str, WeightTensor] = {}
    for name, exp in expected_tensors(hp).items():
        names = hf_expert_names(name, hp.n_experts, model.hf_names)
        if names:
            loads = [_loader(model, n) for n in names]
            stacks[name] = WeightTensor(
                name, exp.shape, F32, load=_stacked(loads), expert_loads=loads
            )
    return stacks


def _stacked(loads: list[Any]) -> Any:
    def load() -> torch.Tensor:
        import torch

        return torch.stack([f() for f in loads])

    return load


def _loader(model: SafetensorsModel, name: str) -> Any:
    def load() -> torch.Tensor:
        return model.tensor(name)

    return load
