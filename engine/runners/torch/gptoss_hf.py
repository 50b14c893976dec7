"""gpt-oss's Hugging Face experts as GGUF's expert stacks (models/files/hparams/gptoss_tensors.py
says where each lives).

A checkpoint fuses a layer's experts into one gate_up tensor with gate and up interleaved
(output feature 2f is gate f, 2f + 1 is up f) and one down tensor, either as floats laid out
(E, in, out) or, in OpenAI's release, as MXFP4 `_blocks`/`_scales` with rows = output features.
Each becomes blk.N.ffn_{gate,up,down}_exps.weight (E, out, in) whose experts are read one at a
time, when a token first chooses them (a slice of the checkpoint, never the whole layer): float
experts as float32 matrices, MXFP4 experts as GGUF MXFP4 blocks (ggml_blocks_from_hf), which the
torch runner packs exactly as it packs a GGUF file's. The biases (E, out) are small and read whole.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from ember.engine.runners.torch.weights import F32, WeightTensor
from ember.models.files.hparams import gptoss_tensors

if TYPE_CHECKING:
    from ember.models.files.hparams.hparams import ModelHParams
    from ember.models.files.safetensors import SafetensorsModel

MXFP4 = 39  # GGML type id
Load = Callable[[], torch.Tensor]
# GGUF stack -> (HF tensor, which output features: gate 0::2, up 1::2, down all)
_PARTS = {
    "ffn_gate_exps": ("gate_up_proj", slice(0, None, 2)),
    "ffn_up_exps": ("gate_up_proj", slice(1, None, 2)),
    "ffn_down_exps": ("down_proj", slice(None)),
}


def expert_stacks(model: SafetensorsModel, hp: ModelHParams) -> dict[str, WeightTensor]:
    """Every layer's expert weights and biases under their GGUF names."""
    shapes = {n: e.shape for n, e in model.entries.items()}
    prefix = model.hf_names.prefix
    out: dict[str, WeightTensor] = {}
    for layer in range(hp.n_layers):
        base = f"{prefix}layers.{layer}.mlp.experts."
        mxfp4 = gptoss_tensors.is_mxfp4(layer, shapes, prefix)
        for stack, (hf_name, rows) in _PARTS.items():
            name = f"blk.{layer}.{stack}.weight"
            out[name] = _stack(model, name, base + hf_name, rows, hp.n_experts, mxfp4)
            if hp.expert_bias:
                bias = f"blk.{layer}.{stack}.bias"
                out[bias] = _bias(model, bias, base + hf_name + "_bias", rows)
    return out


def _stack(
    model: SafetensorsModel, name: str, hf_name: str, rows: slice, n: int, mxfp4: bool
) -> WeightTensor:
    expert = _mxfp4_expert if mxfp4 else _float_expert
    loads = [expert(model, hf_name, e, rows) for e in range(n)]
    first = model.entries[hf_name + ("_blocks" if mxfp4 else "")].shape
    out_rows = len(range(*rows.indices(first[1] if mxfp4 else first[2])))
    cols = first[2] * 32 if mxfp4 else first[1]

    def whole() -> torch.Tensor:  # the stack as float32 (the runner reads experts one by one)
        if not mxfp4:
            return torch.stack([f() for f in loads])
        from gguf import GGMLQuantizationType

        from ember.models.quants.dequant import dequantize

        kind = GGMLQuantizationType(MXFP4)
        return torch.stack([dequantize(f(), kind, (out_rows, cols)) for f in loads])

    qtype = MXFP4 if mxfp4 else F32
    return WeightTensor(name, (n, out_rows, cols), qtype, load=whole, expert_loads=loads)


def _float_expert(model: SafetensorsModel, hf_name: str, e: int, rows: slice) -> Load:
    def load() -> torch.Tensor:  # (in, out) in the checkpoint -> (out, in)
        return model.tensor_row(hf_name, e)[:, rows].t().float().contiguous()

    return load


def _mxfp4_expert(model: SafetensorsModel, hf_name: str, e: int, rows: slice) -> Load:
    def load() -> torch.Tensor:  # (out, G, 16) + (out, G) -> GGUF bytes of (out, G * 32)
        from ember.models.quants.mxfp4 import ggml_blocks_from_hf

        blocks = model.tensor_row(hf_name + "_blocks", e)[rows]
        scales = model.tensor_row(hf_name + "_scales", e)[rows]
        return ggml_blocks_from_hf(blocks, scales).reshape(-1)

    return load


def _bias(model: SafetensorsModel, name: str, hf_name: str, rows: slice) -> WeightTensor:
    shape = model.entries[hf_name].shape
    n, width = shape[0], len(range(*rows.indices(shape[1])))

    def load() -> torch.Tensor:
        return model.tensor(hf_name)[:, rows].float().contiguous()

    return WeightTensor(name, (n, width), F32, load=load)
