"""Turn a ModelSource's tensors into a Transformer: dequantize, fuse, repack, one layer at a time."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ember.engine.errors import EngineError
from ember.engine.runners.torch.config import ModelConfig
from ember.engine.runners.torch.layers.embedding import DeviceEmbedding, QEmbedding
from ember.engine.runners.torch.layers.linear import WEIGHT_FORMATS, QLinear
from ember.engine.runners.torch.layers.norm import RMSNorm
from ember.engine.runners.torch.layers.quantize import CHUNK_ROWS, RowFix, build_linear
from ember.engine.runners.torch.loader import ModelSource
from ember.engine.runners.torch.model import DecoderLayer, LayerWeights, Transformer
from ember.engine.runners.torch.packed_cache import PackedCache, cache_key
from ember.engine.runners.torch.weights import (
    WeightTensor,
    resolve_format,
    unpermute_rope_rows,
)

if TYPE_CHECKING:
    from ember.engine.api import Progress
    from ember.engine.runners.torch.native.kernels import Kernels


@dataclass(frozen=True)
class BuildOptions:
    """Numeric choices: compute dtype, and weight formats for layers and the LM head."""

    dtype: torch.dtype = torch.bfloat16
    device: torch.device = torch.device("cpu")
    weight_format: str = "auto"  # auto | dense | int8 | int4
    head_format: str = "auto"

    def __post_init__(self) -> None:
        for name in ("weight_format", "head_format"):
            if getattr(self, name) not in ("auto", *WEIGHT_FORMATS):
                raise EngineError(
                    f"{name}={getattr(self, name)!r}: use auto, dense, int8, int4 or int8g"
                )


def native_ready(src: ModelSource) -> str:
    """'' when every matrix of src can stay in its GGUF form for the native kernels, else why."""
    from ember.engine.runners.torch.native.structs import BLOCK_COLS, NATIVE_TYPES

    if src.kind != "gguf":
        return f"{src.path}: native kernels read GGUF files ({src.kind} runs on torch kernels)"
    for name, t in src.tensors.items():
        if len(t.shape) not in (2, 3) or name.endswith("norm.weight"):
            continue  # 3-D: stacked experts, each expert a matrix of the same type
        if name.startswith("rope_") or name.endswith("ffn_gate_inp.weight"):
            continue  # RoPE factors are vectors; routers run in float32 torch (experts.py)
        if t.qtype not in NATIVE_TYPES or t.shape[-1] % BLOCK_COLS.get(t.qtype, 1):
            return f"{name}: GGML type {t.qtype} has no native kernel"
    return ""


def _native_out_map(n_rows: list[int], permute: list[int | None], head_dim: int) -> Any:
    """Output columns of a fused linear whose parts' rows are llama.cpp-permuted (interleaved
    RoPE pairs): file row h*D + 2b + a of a permuted part goes to column h*D + a*D/2 + b."""
    import numpy as np

    cols, start = [], 0
    for rows, heads in zip(n_rows, permute, strict=True):
        r = np.arange(rows)
        if heads is not None:
            h, rem = r // head_dim, r % head_dim
            r = h * head_dim + (rem % 2) * (head_dim // 2) + rem // 2
        cols.append(r + start)
        start += rows
    return np.concatenate(cols)


class _Builder:
    def __init__(
        self,
        src: ModelSource,
        opts: BuildOptions,
        cache: PackedCache,
        kernels: Kernels | None = None,
    ) -> None:
        self.src, self.opts, self.cfg, self.cache = src, opts, src.config, cache
        self.kernels = kernels

    def tensor(self, name: str) -> WeightTensor:
        if name not in self.src.tensors:
            raise EngineError(f"{self.src.path}: tensor {name} is missing")
        return self.src.tensors[name]

    def has(self, name: str) -> bool:
        return name in self.src.tensors

    def norm(self, name: str) -> RMSNorm:
        w = self.tensor(name).to_float().to(self.opts.device)
        return RMSNorm(w, self.cfg.norm_eps, self.cfg.norm_offset)

    def linear(
        self, names: list[str], option: str, permute: dict[str, int] | None = None
    ) -> QLinear:
        tensors = [self.tensor(f"{n}.weight") for n in names]
        fixes = [_row_fix(permute.get(n) if permute else None) for n in names]
        biases = [f"{n}.bias" for n in names]
        bias = None
        if any(self.has(b) for b in biases):
            bias = torch.cat(
                [
                    self.tensor(b).to_float() if self.has(b) else torch.zeros(t.shape[0])
                    for b, t in zip(biases, tensors, strict=True)
                ]
            )
        if self.kernels is not None:
            return self._native_linear(names, tensors, bias, permute)
        fmt = resolve_format(option, tensors)
        key = "+".join(names)
        layer = build_linear(
            tensors, fixes, bias, fmt, self.opts.dtype, self.opts.device, self.cache.get(key)
        )
        self.cache.put(key, layer.state())
        return layer

    def _native_linear(
        self,
        names: list[str],
        tensors: list[WeightTensor],
        bias: torch.Tensor | None,
        permute: dict[str, int] | None,
    ) -> QLinear:
        from ember.engine.runners.torch.native.kernels import make_linear

        assert self.kernels is not None
        heads = [permute.get(n) if permute else None for n in names]
        out_map = None
        if any(h is not None for h in heads):
            out_map = _native_out_map([t.shape[0] for t in tensors], heads, self.cfg.head_dim)
        native = make_linear([(t.raw, t.qtype, t.shape) for t in tensors], bias, out_map)
        return QLinear.from_native(native, self.kernels, bias)

    def layer(self, i: int) -> DecoderLayer:
        p, cfg, fmt = f"blk.{i}.", self.cfg, self.opts.weight_format
        permute = None
        if cfg.unpermute_qk:
            permute = {p + "attn_q": cfg.n_heads, p + "attn_k": cfg.n_kv_heads}
        moe = cfg.n_experts > 0
        # phi3 stores q|k|v as one attn_qkv tensor and gate|up as one ffn_up (gate rows first):
        # the same fused rows our linears build from the separate tensors of other families
        qkv = [p + "attn_qkv"] if self.has(p + "attn_qkv.weight") else [p + n for n in _QKV]
        gate_up = (
            [p + "ffn_gate", p + "ffn_up"] if self.has(p + "ffn_gate.weight") else [p + "ffn_up"]
        )
        w = LayerWeights(
            attn_norm=self.norm(p + "attn_norm.weight"),
            qkv=self.linear(qkv, fmt, permute),
            o_proj=self.linear([p + "attn_output"], fmt),
            ffn_norm=self.norm(p + "ffn_norm.weight"),
            gate_up=None if moe else self.linear(gate_up, fmt),
            down=None if moe else self.linear([p + "ffn_down"], fmt),
        )
        if moe:
            from ember.engine.runners.torch.experts import build_moe

            w.moe = build_moe(self, i)
        if cfg.qk_norm:
            q_w = self.tensor(p + "attn_q_norm.weight").to_float()
            k_w = self.tensor(p + "attn_k_norm.weight").to_float()
            both = torch.cat((q_w.expand(cfg.n_heads, -1), k_w.expand(cfg.n_kv_heads, -1)))
            w.qk_norm = RMSNorm(both.to(self.opts.device), cfg.norm_eps, cfg.norm_offset)
        if cfg.sandwich_norms:
            w.post_attn_norm = self.norm(p + "post_attention_norm.weight")
            w.post_ffn_norm = self.norm(p + "post_ffw_norm.weight")
        return DecoderLayer(i, cfg, w)

    def embedding(self) -> QEmbedding | DeviceEmbedding:
        table = self.tensor("token_embd.weight")
        if self.opts.device.type != "cpu":
            return DeviceEmbedding(
                table.row_chunks(CHUNK_ROWS),
                table.shape[0],
                self.cfg.embed_scale,
                self.opts.dtype,
                self.opts.device,
            )
        if self.kernels is not None:
            from ember.engine.runners.torch.native.kernels import mat_of

            kernels, mat = self.kernels, mat_of(table.raw, table.qtype, table.shape)
            return QEmbedding(
                lambda ids: kernels.gather(mat, ids),
                self.cfg.embed_scale,
                self.opts.dtype,
                self.opts.device,
            )
        if table.load is not None:  # safetensors: a dense table in memory
            dense = table.to_float()
            return QEmbedding(
                lambda ids: dense.index_select(0, ids),
                self.cfg.embed_scale,
                self.opts.dtype,
                self.opts.device,
            )
        return QEmbedding(table.rows, self.cfg.embed_scale, self.opts.dtype, self.opts.device)

    def head(self) -> QLinear:
        name = (
            "token_embd" if self.cfg.tie_embeddings or not self.has("output.weight") else "output"
        )
        return self.linear([name], self.opts.head_format)


_QKV = ("attn_q", "attn_k", "attn_v")


def _row_fix(n_heads: int | None) -> RowFix | None:
    if n_heads is None:
        return None
    return lambda w: unpermute_rope_rows(w, n_heads)


def build_model(
    src: ModelSource,
    opts: BuildOptions,
    cache_root: Path | None = None,
    kernels: Kernels | None = None,
    progress: Progress | None = None,
) -> Transformer:
    """Assemble the Transformer for src with opts (weights leave the mmap layer by layer;
    progress hears each layer: "packing weights" when the packed cache has none yet).

    With kernels (the native library; see native_ready), every matrix stays in the file's
    mmap in its GGUF form and nothing is converted or cached. Otherwise, with cache_root (CPU
    only), converted weights are mapped from the packed-weight cache when an earlier build
    saved them, and saved there after a build otherwise."""
    cache = PackedCache(None)
    if kernels is None and cache_root is not None and opts.device.type == "cpu":
        options = f"{opts.dtype}|{opts.weight_format}|{opts.head_format}"
        cache = PackedCache.open(cache_root, cache_key(src.path, src.digest, options))
    b = _Builder(src, opts, cache, kernels)
    cfg: ModelConfig = src.config
    packing = kernels is None and cache.path is not None and cache.found is None
    stage = "packing weights (first run of this model)" if packing else "loading weights"
    layers = []
    for i in range(cfg.n_layers):
        layers.append(b.layer(i))
        if progress is not None:
            progress(stage, i + 1, cfg.n_layers)
    model = Transformer(cfg, b.embedding(), layers, b.norm("output_norm.weight"), b.head())
    cache.save()
    return model
