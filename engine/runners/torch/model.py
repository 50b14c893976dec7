"""The generic decoder (every dense family differs only by ModelConfig switches).

All sequences of a step run as one flat batch of N tokens through the matmuls; attention runs
per sequence over its own KV blocks.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ember.engine.runners.torch.config import ModelConfig
from ember.engine.runners.torch.heap import release_free_heap
from ember.engine.runners.torch.kv_store import KVStore
from ember.engine.runners.torch.layers.attention import AttnPlan, attend
from ember.engine.runners.torch.layers.decode_attention import DecodeTables, attend_decode
from ember.engine.runners.torch.layers.embedding import DeviceEmbedding, QEmbedding
from ember.engine.runners.torch.layers.linear import DENSE_PREFILL_TOKENS, QLinear
from ember.engine.runners.torch.layers.moe import MoEFFN
from ember.engine.runners.torch.layers.norm import RMSNorm
from ember.engine.runners.torch.layers.rope import apply_rope_signed


@dataclass
class StepContext:
    """Per-forward tensors shared by every layer."""

    slots: torch.Tensor  # (N,) int64 KV slot of each new token
    spans: list[tuple[int, int]]  # per sequence: [start, end) of its tokens in the flat batch
    plans: dict[bool, list[AttnPlan]]  # is_sliding -> per sequence plan
    rope: dict[bool, tuple[torch.Tensor, torch.Tensor]]  # is_sliding -> cos, signed sin (N, 1, D)
    # one-token decode steps in one batch (static shapes, CUDA graphs): is_sliding -> tables;
    # when set, spans and plans are unused and attention reads the pools through the tables
    decode: dict[bool, DecodeTables] | None = None
    visible: dict[bool, torch.Tensor] | None = None  # filled by Transformer.forward from decode
    q_scale: torch.Tensor | None = None  # (N, 1, 1) query temperature by position (mistral3)


@dataclass
class LayerWeights:
    """The modules of one decoder layer."""

    attn_norm: RMSNorm
    qkv: QLinear  # fused q, k, v projections
    o_proj: QLinear
    ffn_norm: RMSNorm
    gate_up: QLinear | None  # fused gate and up projections (None: a MoE layer)
    down: QLinear | None
    moe: MoEFFN | None = None  # the routed experts that replace gate_up and down
    qk_norm: RMSNorm | None = None  # per-head q and k norms as one (H + Hkv, head_dim) weight
    post_attn_norm: RMSNorm | None = None
    post_ffn_norm: RMSNorm | None = None


class DecoderLayer(nn.Module):
    """Pre-norm attention + gated MLP, with optional q/k norms and sandwich norms."""

    def __init__(self, index: int, cfg: ModelConfig, w: LayerWeights) -> None:
        super().__init__()
        self.index = index
        self.sliding = cfg.is_sliding(index)
        self.rotates = cfg.uses_rope(index)  # False: a NoPE layer (smollm3's every 4th)
        self.w = w
        self.n_heads, self.n_kv, self.head_dim = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        self.scale, self.softcap = cfg.scale, cfg.attn_softcap
        self.gelu = cfg.activation == "gelu_tanh"

    def forward(
        self, x: torch.Tensor, ctx: StepContext, kv: KVStore
    ) -> torch.Tensor:  # (N, hidden)
        w, n = self.w, x.shape[0]
        h, h_kv = self.n_heads, self.n_kv
        qkv = w.qkv(w.attn_norm(x)).view(n, h + 2 * h_kv, self.head_dim)
        qk, v = qkv[:, : h + h_kv], qkv[:, h + h_kv :]
        if w.qk_norm is not None:
            qk = w.qk_norm(qk)
        if self.rotates:
            cos, sin = ctx.rope[self.sliding]
            qk = apply_rope_signed(qk, cos, sin)  # q and k heads rotated in one pass
        q, k = qk[:, :h], qk[:, h:]
        if ctx.q_scale is not None:
            q = (q.float() * ctx.q_scale).to(q.dtype)
        kv.write(self.index, ctx.slots, k, v)
        if ctx.decode is not None and ctx.visible is not None:
            keys, values = kv.gather_tables(self.index, ctx.decode[self.sliding].blocks)
            visible = ctx.visible[self.sliding]
            attn = attend_decode(q, keys, values, visible, self.scale, self.softcap)
        else:
            outs = []
            for (start, end), plan in zip(ctx.spans, ctx.plans[self.sliding], strict=True):
                keys, values = kv.gather(self.index, plan.blocks, plan.num_keys)
                outs.append(attend(q[start:end], keys, values, plan.mask, self.scale, self.softcap))
            attn = outs[0] if len(outs) == 1 else torch.cat(outs)
        o = w.o_proj(attn.reshape(n, h * self.head_dim))
        if w.post_attn_norm is not None:
            o = w.post_attn_norm(o)
        x = x + o
        y = self.ffn(w.ffn_norm(x))
        if w.post_ffn_norm is not None:
            y = w.post_ffn_norm(y)
        return x + y

    def ffn(self, h: torch.Tensor) -> torch.Tensor:  # (N, hidden) normed -> (N, hidden)
        """The gated MLP, or the routed experts of a MoE layer."""
        w = self.w
        if w.moe is not None:
            return w.moe(h)
        assert w.gate_up is not None and w.down is not None
        gate, up = w.gate_up(h).chunk(2, dim=-1)
        act = F.gelu(gate, approximate="tanh") if self.gelu else F.silu(gate)
        return w.down(act * up)


class Transformer(nn.Module):
    """Embedding -> decoder layers -> final norm -> LM head (optionally soft-capped)."""

    def __init__(
        self,
        cfg: ModelConfig,
        embed: QEmbedding | DeviceEmbedding,
        layers: list[DecoderLayer],
        norm: RMSNorm,
        head: QLinear,
    ) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed = embed
        self.layers = nn.ModuleList(layers)
        self.norm = norm
        self.head = head

    def forward(
        self, ids: torch.Tensor, ctx: StepContext, kv: KVStore, logit_rows: torch.Tensor
    ) -> torch.Tensor:
        """ids (N,) -> float32 logits (R, vocab) for the flat-batch rows logit_rows (R,)."""
        if ctx.decode is not None:
            ctx.visible = {s: t.visible(kv.block_size) for s, t in ctx.decode.items()}
        x = self.embed(ids)
        for layer in self.layers:
            x = layer(x, ctx, kv)
        if ids.device.type == "cpu" and ids.shape[0] >= DENSE_PREFILL_TOKENS:
            release_free_heap()  # the layers' freed buffers, before the head pages in (heap.py)
        x = self.norm(x.index_select(0, logit_rows))
        logits = self.head(x).float()
        cap = self.cfg.final_softcap
        return torch.tanh(logits / cap) * cap if cap else logits
