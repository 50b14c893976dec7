"""Open a model (GGUF file or HF safetensors folder) as a config plus named weight tensors."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ember.engine.errors import EngineError
from ember.engine.runners.torch.arch import arch_for_gguf, arch_for_hf
from ember.engine.runners.torch.arch.config_gguf import config_from_gguf
from ember.engine.runners.torch.arch.config_hf import config_from_hf
from ember.engine.runners.torch.arch.spec import ArchSpec
from ember.engine.runners.torch.config import ModelConfig
from ember.engine.runners.torch.weights import F32, WeightTensor


@dataclass
class ModelSource:
    """A model's config and its tensors under GGUF names, plus where it came from."""

    path: Path
    kind: str  # "gguf" | "safetensors"
    spec: ArchSpec
    config: ModelConfig
    tensors: dict[str, WeightTensor]
    digest: str  # the content digest app resolved (ModelFiles.digest); "" = none given
    keepalive: Any = None  # the reader whose mmap backs the GGUF views


def open_model(path: str | Path, digest: str = "") -> ModelSource:
    """Read the header of a GGUF file or an HF folder; tensors stay on disk until used."""
    path = Path(path)
    if path.is_dir():
        return _open_safetensors(path, digest)
    if not path.is_file():
        raise EngineError(f"{path}: no such model file or folder")
    return _open_gguf(path, digest)


def _open_gguf(path: Path, digest: str) -> ModelSource:
    from ember.models.files.gguf import open_gguf

    model = open_gguf(path)  # bounded header check; tensors are zero-copy mmap views
    spec = arch_for_gguf(model.architecture, path)
    tensors = {
        name: WeightTensor(name, tuple(t.shape), int(t.qtype), raw=t.raw)
        for name, t in model.tensors.items()
    }
    config = config_from_gguf(spec, model.metadata, {n: w.shape for n, w in tensors.items()})
    return ModelSource(path, "gguf", spec, config, tensors, digest, keepalive=model)


_HF_LAYER = re.compile(r"^layers\.(\d+)\.(.+)$")
_HF_PREFIXES = ("model.language_model.", "language_model.model.", "model.")
_HF_ATTN = {"q_proj": "attn_q", "k_proj": "attn_k", "v_proj": "attn_v", "o_proj": "attn_output"}
_HF_MLP = {"gate_proj": "ffn_gate", "up_proj": "ffn_up", "down_proj": "ffn_down"}


def hf_to_gguf_name(spec: ArchSpec, name: str) -> str | None:
    """GGUF name of an HF tensor name (None: not a weight the decoder uses)."""
    if name in ("lm_head.weight", "language_model.lm_head.weight"):
        return "output.weight"
    for prefix in _HF_PREFIXES:
        if name.startswith(prefix):
            name = name[len(prefix) :]
            break
    else:
        return None
    if name == "embed_tokens.weight":
        return "token_embd.weight"
    if name == "norm.weight":
        return "output_norm.weight"
    m = _HF_LAYER.match(name)
    if not m:
        return None
    layer, rest = m.group(1), m.group(2)
    module, _, leaf = rest.rpartition(".")  # leaf: weight | bias
    group, _, sub = module.partition(".")
    if group == "self_attn" and sub in _HF_ATTN:
        return f"blk.{layer}.{_HF_ATTN[sub]}.{leaf}"
    if group == "self_attn" and sub in ("q_norm", "k_norm"):
        return f"blk.{layer}.attn_{sub}.{leaf}"
    if group == "mlp" and sub in _HF_MLP:
        return f"blk.{layer}.{_HF_MLP[sub]}.{leaf}"
    if module in spec.hf_norm_names:
        return f"blk.{layer}.{spec.hf_norm_names[module]}.{leaf}"
    return None


def _open_safetensors(folder: Path, digest: str) -> ModelSource:
    from safetensors import safe_open

    cfg_path = folder / "config.json"
    if not cfg_path.is_file():
        raise EngineError(f"{folder}: no config.json")
    cfg = json.loads(cfg_path.read_text())
    spec = arch_for_hf(str(cfg.get("model_type", "?")), folder)
    config = config_from_hf(spec, cfg)
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise EngineError(f"{folder}: no .safetensors files (pickle checkpoints are refused)")
    tensors: dict[str, WeightTensor] = {}
    handles = []
    for f in files:
        handle = safe_open(str(f), framework="pt")
        handles.append(handle)
        for hf_name in handle.keys():  # noqa: SIM118 - safe_open is not a mapping
            name = hf_to_gguf_name(spec, hf_name)
            if name is None:
                continue
            shape = tuple(handle.get_slice(hf_name).get_shape())
            tensors[name] = WeightTensor(name, shape, F32, load=_loader(handle, hf_name))
    if "token_embd.weight" not in tensors:
        raise EngineError(f"{folder}: no embedding table (model.embed_tokens.weight)")
    return ModelSource(folder, "safetensors", spec, config, tensors, digest, keepalive=handles)


def _loader(handle: Any, name: str) -> Any:
    return lambda: handle.get_tensor(name)
