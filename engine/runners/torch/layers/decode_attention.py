"""Attention for a batch of one-token decode steps in one call, with static shapes.

Each sequence's keys are read from the paged pools through its row of a padded block table
(B, max_blocks): one gather for the whole batch, then one fused attention call with a mask of
each row's visible keys. The shapes depend only on (B, max_blocks), so the step can be captured
in a CUDA graph (cuda_graphs.py) and replayed for any sequences that fit; on the CPU the same
code is the reference the tests compare with the per-sequence path.

Sliding-window layers get a table of their own that starts at the first block inside the
window, so they read at most window + block_size keys.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ember.engine.runners.torch.layers.attention_sinks import sink_softmax


@dataclass
class DecodeTables:
    """Which keys each decode token reads: blocks (B, max_blocks) int64 padded with block 0,
    first (B,) int64 cache index of the table's first slot, end (B,) int64 its keys' end."""

    blocks: torch.Tensor
    first: torch.Tensor
    end: torch.Tensor
    window: int | None = None  # sliding layers: keys j with end - window <= j

    @classmethod
    def build(
        cls,
        tables: list[list[int]],
        ends: list[int],
        block_size: int,
        max_blocks: int,
        window: int | None,
        device: torch.device,
    ) -> DecodeTables:
        """Tables of sequences whose newest token sits at cache index ends[i] - 1."""
        rows, firsts = [], []
        for table, end in zip(tables, ends, strict=True):
            start = 0 if window is None else max(0, end - window)
            first_block = start // block_size
            row = table[first_block : (end - 1) // block_size + 1]
            if len(row) > max_blocks:
                raise ValueError(f"{len(row)} blocks do not fit a table of {max_blocks}")
            rows.append(row + [0] * (max_blocks - len(row)))
            firsts.append(first_block * block_size)
        return cls(
            torch.tensor(rows, dtype=torch.int64, device=device),
            torch.tensor(firsts, dtype=torch.int64, device=device),
            torch.tensor(ends, dtype=torch.int64, device=device),
            window,
        )

    def copy_(self, other: DecodeTables) -> None:
        """Fill these (static) tensors from a table of the same shape (CUDA-graph inputs)."""
        self.blocks.copy_(other.blocks)
        self.first.copy_(other.first)
        self.end.copy_(other.end)

    def visible(self, block_size: int) -> torch.Tensor:
        """(B, max_blocks * block_size) bool: slot i of row b holds a key its token sees."""
        slots = self.blocks.shape[1] * block_size
        index = self.first[:, None] + torch.arange(slots, device=self.blocks.device)[None, :]
        seen = index < self.end[:, None]
        if self.window is not None:
            seen &= index >= self.end[:, None] - self.window
        return seen


def attend_decode(
    q: torch.Tensor,  # (B, H, D): one query token per sequence
    keys: torch.Tensor,  # (B, L, Hkv, D): the tables' slots, gathered
    values: torch.Tensor,  # (B, L, Hkv, D)
    visible: torch.Tensor,  # (B, L) bool
    scale: float,
    softcap: float | None,
    sink_logits: torch.Tensor | None = None,  # (H,) float32: gpt-oss's learned sinks
) -> torch.Tensor:  # (B, H, D)
    """softmax(q k^T * scale [soft-capped], masked [, a sink logit per head]) v per row, query
    heads grouped per KV head."""
    b, heads, dim = q.shape
    n_kv = keys.shape[2]
    group = heads // n_kv
    if softcap is None and sink_logits is None and q.device.type != "cpu":
        out = torch.nn.functional.scaled_dot_product_attention(
            q[:, :, None, :],
            keys.transpose(1, 2).to(q.dtype),
            values.transpose(1, 2).to(q.dtype),
            attn_mask=visible[:, None, None, :],
            scale=scale,
            enable_gqa=group > 1,
        )
        return out[:, :, 0, :]
    # float32 reference: (B, Hkv, group, D) x (B, Hkv, D, L)
    qg = q.float().view(b, n_kv, group, dim)
    scores = torch.matmul(qg, keys.float().permute(0, 2, 3, 1)) * scale  # (B, Hkv, group, L)
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    scores = scores.masked_fill(~visible[:, None, None, :], -torch.inf)
    if sink_logits is not None:
        probs = sink_softmax(scores, sink_logits.float().view(1, n_kv, group, 1))
    else:
        probs = torch.softmax(scores, dim=-1)
    out = torch.matmul(probs, values.float().transpose(1, 2))  # (B, Hkv, group, D)
    return out.reshape(b, heads, dim).to(q.dtype)
