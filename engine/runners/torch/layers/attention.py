"""Causal grouped-query attention of one sequence's new tokens over its paged KV blocks.

An AttnPlan says which blocks a sequence's queries read (sliding layers read only the blocks
inside their window) and the mask; it is built once per step and shared by all layers of a kind.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ember.engine.runners.torch.layers.attention_sinks import sink_softmax


@dataclass
class AttnPlan:
    """What one sequence's queries read from the KV pools in one step."""

    blocks: torch.Tensor  # int64 physical block ids, in cache order
    num_keys: int  # slots of `blocks` holding keys, from the first block's start
    mask: torch.Tensor | None  # (T, num_keys) bool, True = attend; None = all keys visible


def make_plan(
    block_table: list[int],
    num_cached: int,
    num_new: int,
    block_size: int,
    window: int | None,
    device: torch.device,
) -> AttnPlan:
    """Plan for queries at cache indices num_cached .. num_cached + num_new - 1.

    Query i sees key j iff j <= i and (no window or i - j < window).
    """
    total = num_cached + num_new
    first_key = 0 if window is None else max(0, num_cached - window + 1)
    first_block = first_key // block_size
    last_block = (total - 1) // block_size
    blocks = torch.tensor(
        block_table[first_block : last_block + 1], dtype=torch.int64, device=device
    )
    offset = first_block * block_size
    num_keys = total - offset
    needs_mask = num_new > 1 or (window is not None and num_cached - window + 1 > offset)
    mask = None
    if needs_mask:
        key_idx = torch.arange(offset, total, device=device)[None, :]
        query_idx = torch.arange(num_cached, total, device=device)[:, None]
        mask = key_idx <= query_idx
        if window is not None:
            mask &= query_idx - key_idx < window
    return AttnPlan(blocks, num_keys, mask)


SCORE_BUDGET = 1 << 23  # float32 scores materialized at once (32 MiB): longer prompts go by rows


def attend(
    q: torch.Tensor,  # (T, H, D)
    k: torch.Tensor,  # (L, Hkv, D)
    v: torch.Tensor,  # (L, Hkv, D)
    mask: torch.Tensor | None,  # (T, L) bool
    scale: float,
    softcap: float | None,
    sink_logits: torch.Tensor | None = None,  # (H,) float32: gpt-oss's learned sinks
) -> torch.Tensor:  # (T, H, D)
    """softmax(q k^T * scale [soft-capped] + mask [+ a sink logit per head]) v, with H / Hkv
    query heads per KV head (attention_sinks.py says what the sink logits are).

    Without a soft-cap or sinks, several queries go to torch's fused attention (attend_sdpa; on
    CPU its flash kernel, in float32): against the explicit batched matmuls (attend_matmuls),
    Xeon, 2 threads, 32 query / 8 KV heads of 64: 11.6 vs 49.6 ms for a 512-token prompt, 98
    vs 718 ms for 2048, 26 vs 105 ms for 512 after 512 cached (a boolean mask); Gemma 3's 4 / 1
    heads of 256: 62 vs 134 ms at 2048; even from 2 to 16 queries. Both are as close to float64
    (rms 7.5e-7 to 1.5e-6 on random scores). One query (a decode step off the native path)
    stays on the matmuls: 0.2-0.5 ms against 0.4-1.0 at 2047 keys.
    """
    if softcap is None and sink_logits is None and (q.device.type != "cpu" or q.shape[0] > 1):
        return attend_sdpa(q, k, v, mask, scale)
    t, heads, dim = q.shape
    rows = max(1, SCORE_BUDGET // (heads * k.shape[0]))
    if t <= rows:
        return attend_matmuls(q, k, v, mask, scale, softcap, sink_logits)
    parts = [
        attend_matmuls(
            q[i : i + rows],
            k,
            v,
            None if mask is None else mask[i : i + rows],
            scale,
            softcap,
            sink_logits,
        )
        for i in range(0, t, rows)
    ]
    return torch.cat(parts)


def attend_sdpa(
    q: torch.Tensor,  # (T, H, D)
    k: torch.Tensor,  # (L, Hkv, D)
    v: torch.Tensor,  # (L, Hkv, D)
    mask: torch.Tensor | None,  # (T, L) bool
    scale: float,
) -> torch.Tensor:  # (T, H, D)
    """torch's fused attention (flash or memory-efficient kernels; on CPU in float32, as the
    matmuls compute scores). A square causal mask becomes is_causal (flash); other masks go in
    as boolean masks; GQA without repeating the KV heads."""
    t, length = q.shape[0], k.shape[0]
    causal = mask is not None and t == length and bool(mask.equal(_tril(t, mask.device)))
    work = torch.float32 if q.device.type == "cpu" else q.dtype
    out = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(0, 1)[None].to(work),  # (1, H, T, D)
        k.transpose(0, 1)[None].to(work),
        v.transpose(0, 1)[None].to(work),
        attn_mask=None if causal or mask is None else mask[None, None],
        is_causal=causal,
        scale=scale,
        enable_gqa=q.shape[1] != k.shape[1],
    )
    return out[0].transpose(0, 1).to(q.dtype)


def _tril(n: int, device: torch.device) -> torch.Tensor:
    return torch.ones(n, n, dtype=torch.bool, device=device).tril()


def attend_matmuls(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None,
    scale: float,
    softcap: float | None,
    sink_logits: torch.Tensor | None,
) -> torch.Tensor:
    t, heads, dim = q.shape
    length, n_kv = k.shape[0], k.shape[1]
    group = heads // n_kv
    # query head h reads KV head h // group: fold (T, group) into the rows of each KV head
    qg = q.view(t, n_kv, group, dim).permute(1, 0, 2, 3).reshape(n_kv, t * group, dim)
    # float32 products: bf16 scores cost ~1 point of top-1 agreement with llama.cpp
    scores = torch.bmm(qg.float(), k.float().permute(1, 2, 0)) * scale  # (Hkv, T*group, L)
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap  # soft-capping: softcap * tanh(s / softcap)
    if mask is not None:
        scores = scores.view(n_kv, t, group, length).masked_fill(
            ~mask[None, :, None, :], -torch.inf
        )
    if sink_logits is not None:  # head h = kv head h // group, member h % group
        grouped = scores.view(n_kv, t, group, length)
        sinks = sink_logits.float().view(n_kv, 1, group, 1)
        probs = sink_softmax(grouped, sinks).view(n_kv, t * group, length)
    else:
        probs = torch.softmax(scores, dim=-1).view(n_kv, t * group, length)
    out = torch.bmm(probs, v.float().transpose(0, 1))  # (Hkv, T*group, D)
    return out.view(n_kv, t, group, dim).permute(1, 0, 2, 3).reshape(t, heads, dim).to(q.dtype)
