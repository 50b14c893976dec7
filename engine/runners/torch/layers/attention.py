"""Causal grouped-query attention of one sequence's new tokens over its paged KV blocks.

An AttnPlan says which blocks a sequence's queries read (sliding layers read only the blocks
inside their window) and the mask; it is built once per step and shared by all layers of a kind.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


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


def attend(
    q: torch.Tensor,  # (T, H, D)
    k: torch.Tensor,  # (L, Hkv, D)
    v: torch.Tensor,  # (L, Hkv, D)
    mask: torch.Tensor | None,  # (T, L) bool
    scale: float,
    softcap: float | None,
) -> torch.Tensor:  # (T, H, D)
    """softmax(q k^T * scale [soft-capped] + mask) v, with H / Hkv query heads per KV head."""
    qh, kh, vh = q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)  # (heads, len, D)
    if softcap is None:
        out = F.scaled_dot_product_attention(
            qh, kh, vh, attn_mask=mask, scale=scale, enable_gqa=True
        )
        return out.transpose(0, 1)
    group = q.shape[1] // k.shape[1]
    kh, vh = kh.repeat_interleave(group, 0), vh.repeat_interleave(group, 0)
    scores = (qh.float() @ kh.float().transpose(1, 2)) * scale  # (H, T, L)
    scores = torch.tanh(scores / softcap) * softcap  # soft-capping: softcap * tanh(s / softcap)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    out = torch.softmax(scores, dim=-1).to(vh.dtype) @ vh
    return out.transpose(0, 1)
