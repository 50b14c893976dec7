"""NativeModel: the whole decoder as one em_model, so a decode step is one C call.

It shares everything with the torch modules of the same model: the GGUF matrices (em_mat views
of the file's mmap, never copied), a MoE layer's em_moe (native/moe.py), the norm weights (the RMSNorm modules' float32 tensors) and
the KV pools (the KVStore's tensors). Only small steps run here (decode, drafts, short chunks);
long prefills run through the torch modules, which write the same pools.
"""

from __future__ import annotations

import ctypes as C
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch

from ember.engine.errors import EngineError
from ember.engine.runners.torch.native import structs as S
from ember.engine.runners.torch.native.kernels import NativeLinear, float_ptr
from ember.engine.runners.torch.ropes import temperature_at

if TYPE_CHECKING:
    from ember.engine.runners.base import SeqStep
    from ember.engine.runners.torch.kv_store import KVStore
    from ember.engine.runners.torch.layers.rope import Rope
    from ember.engine.runners.torch.model import LayerWeights, Transformer

_KV_TYPES = {torch.float32: S.KV_F32, torch.bfloat16: S.KV_BF16, torch.float16: S.KV_F16}


def _linear(lin: Any) -> NativeLinear:
    native = getattr(lin, "native", None)
    if native is None:
        raise EngineError("native decode needs every linear layer in a native GGUF form")
    return native


class NativeModel:
    """em_model over a Transformer built with native linears (see build.py)."""

    def __init__(self, lib: C.CDLL, model: Transformer, embed: S.EmMat, keep: list[Any]) -> None:
        cfg = model.cfg
        self.lib, self.cfg, self.keep = lib, cfg, keep
        self.layers = (S.EmLayer * cfg.n_layers)()
        for i, layer in enumerate(model.layers):
            w, d = cast("LayerWeights", layer.w), self.layers[i]
            d.qkv, d.o = _linear(w.qkv).desc, _linear(w.o_proj).desc
            if w.moe is not None:  # routed experts (csrc/moe.c) in place of gate_up and down
                if w.moe.native is None:
                    raise EngineError("native decode needs the MoE layers in their native form")
                d.moe = C.addressof(w.moe.native.desc)
            else:
                d.gate_up, d.down = _linear(w.gate_up).desc, _linear(w.down).desc
            d.attn_norm, d.ffn_norm = float_ptr(w.attn_norm.weight), float_ptr(w.ffn_norm.weight)
            if w.post_attn_norm is not None and w.post_ffn_norm is not None:
                d.post_attn_norm = float_ptr(w.post_attn_norm.weight)
                d.post_ffn_norm = float_ptr(w.post_ffn_norm.weight)
            if w.qk_norm is not None:
                qk = w.qk_norm.weight  # (H + Hkv, D): rows 0 and H are the q and k weights
                d.q_norm, d.k_norm = float_ptr(qk[0]), float_ptr(qk[cfg.n_heads])
            d.rope = (1 if layer.sliding else 0) if cfg.uses_rope(i) else -1  # -1: NoPE
            d.window = int(cfg.sliding_window or 0) if layer.sliding else 0
        m = self.desc = S.EmModel()
        m.n_layers, m.hidden, m.n_heads = cfg.n_layers, cfg.hidden_size, cfg.n_heads
        m.n_kv, m.head_dim, m.ffn, m.vocab = (
            cfg.n_kv_heads,
            cfg.head_dim,
            cfg.ffn_size,
            cfg.vocab_size,
        )
        m.act = 1 if cfg.activation == "gelu_tanh" else 0
        m.norm_eps, m.attn_scale = cfg.norm_eps, cfg.scale
        m.attn_softcap, m.final_softcap = cfg.attn_softcap or 0.0, cfg.final_softcap or 0.0
        m.embed_scale, m.embed = cfg.embed_scale, embed
        m.head, m.out_norm = _linear(model.head).desc, float_ptr(model.norm.weight)
        m.layers = C.cast(self.layers, C.POINTER(S.EmLayer))
        m.rope_dim = cfg.rope_dim
        self.kv: KVStore | None = None

    def bind_kv(self, kv: KVStore) -> None:
        """Point every layer at the KV store's pools (after each init_kv)."""
        if kv.dtype not in _KV_TYPES and not kv.quantized:  # pragma: no cover - guarded by options
            raise EngineError(f"native decode: KV dtype {kv.dtype} is not supported")
        self.desc.kv_type = S.KV_I8 if kv.quantized else _KV_TYPES[kv.dtype]
        self.desc.block_size = kv.block_size
        for i, d in enumerate(self.layers):
            d.k_pool, d.v_pool = kv.k[i].data_ptr(), kv.v[i].data_ptr()
            if kv.quantized:
                d.k_scale, d.v_scale = float_ptr(kv.k_scale[i]), float_ptr(kv.v_scale[i])
        self.kv = kv

    def forward(self, steps: list[SeqStep], ropes: dict[bool, Rope]) -> list[np.ndarray]:
        """Per step, float32 logits (num_logits, vocab): one em_forward call for all steps."""
        kv = self.kv
        assert kv is not None
        bs = kv.block_size
        ids: list[int] = []
        pos: list[int] = []
        slots: list[int] = []
        key_end: list[int] = []
        table: list[int] = []
        blocks: list[int] = []
        rows: list[int] = []
        for st in steps:
            n, start = len(st.token_ids), len(ids)
            total = st.num_cached + n
            if n == 0 or len(st.block_table) * bs < total or not 1 <= st.num_logits <= n:
                raise EngineError(
                    f"seq {st.seq_id}: bad step ({n} tokens, {len(st.block_table)} blocks)"
                )
            if max(st.block_table[: (total - 1) // bs + 1]) >= kv.num_blocks:
                raise EngineError(f"seq {st.seq_id}: block id beyond the KV pool")
            offset = len(blocks)
            blocks.extend(st.block_table)
            ids.extend(st.token_ids)
            pos.extend(st.positions)
            for i in range(st.num_cached, total):
                slots.append(st.block_table[i // bs] * bs + i % bs)
                key_end.append(i + 1)
                table.append(offset)
            rows.extend(range(start + n - st.num_logits, start + n))
        arrays = [np.asarray(a, dtype=np.int32) for a in (ids, pos, key_end, table, blocks, rows)]
        ids_a, pos_a, end_a, table_a, blocks_a, rows_a = arrays
        slots_a = np.asarray(slots, dtype=np.int64)
        if ids_a.size and (ids_a.min() < 0 or ids_a.max() >= self.cfg.vocab_size):
            raise EngineError(f"token id outside the vocabulary (0..{self.cfg.vocab_size - 1})")
        s = S.EmStep()
        s.n_tokens, s.n_threads = len(ids), torch.get_num_threads()
        s.token_ids, s.positions = ids_a.ctypes.data_as(S.I32P), pos_a.ctypes.data_as(S.I32P)
        s.slots, s.key_end = slots_a.ctypes.data_as(S.I64P), end_a.ctypes.data_as(S.I32P)
        s.table, s.blocks = table_a.ctypes.data_as(S.I32P), blocks_a.ctypes.data_as(S.I32P)
        s.n_rows, s.rows = len(rows), rows_a.ctypes.data_as(S.I32P)
        tables = _rope_tables(ropes, pos_a)
        for i, (inv_freq, factor) in enumerate(tables):
            s.inv_freq[i], s.rope_factor[i] = float_ptr(inv_freq), factor
        q_scale = None
        if self.cfg.attn_temperature is not None:  # mistral3's query temperature by position
            q_scale = np.asarray([temperature_at(self.cfg, p) for p in pos], dtype=np.float32)
            s.q_scale = q_scale.ctypes.data_as(S.F32P)
        logits = np.empty((len(rows), self.cfg.vocab_size), dtype=np.float32)
        if self.lib.em_forward(C.byref(self.desc), C.byref(s), logits.ctypes.data) != 0:
            raise MemoryError("native forward: out of memory")
        out, at = [], 0
        for st in steps:
            out.append(logits[at : at + st.num_logits])
            at += st.num_logits
        return out


def _rope_tables(
    ropes: dict[bool, Rope], positions: np.ndarray
) -> list[tuple[torch.Tensor, float]]:
    """(inv_freq, factor) of the global and sliding RoPE (the same twice without sliding layers);
    dynamic-NTK ropes are updated for these positions first."""
    out = []
    for sliding in (False, True):
        rope = ropes.get(sliding) or next(iter(ropes.values()))
        if rope.params.kind == "dynamic" and positions.size:
            rope.cos_sin(torch.tensor([int(positions.max())]))  # grows the base if needed
        out.append((rope.inv_freq.float().contiguous(), float(rope.attn_factor)))
    return out
