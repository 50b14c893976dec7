"""Paged attention plans (causal, sliding window touching only window blocks) and soft-capping."""

from __future__ import annotations

import torch

from ember.engine.runners.torch.layers.attention import attend, make_plan


def _naive(
    q: torch.Tensor,  # [T, H, D]
    k: torch.Tensor,  # [L, H_kv, D]
    v: torch.Tensor,  # [L, H_kv, D]
    mask: torch.Tensor,  # [T, L] bool: query t may see key l
    scale: float,
    softcap: float | None,
) -> torch.Tensor:  # [T, H, D]
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    s = torch.einsum("thd,lhd->htl", q, k) * scale
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    s = s.masked_fill(~mask, float("-inf"))
    return torch.einsum("htl,lhd->thd", s.softmax(-1), v)


def test_sliding_plan_reads_only_window_blocks() -> None:
    # 40 cached tokens in blocks of 4, window 8: query at index 40 sees keys 33..40 (blocks 8..10)
    table = list(range(100, 111))
    plan = make_plan(
        table, num_cached=40, num_new=1, block_size=4, window=8, device=torch.device("cpu")
    )
    assert plan.blocks.tolist() == [108, 109, 110]
    assert plan.num_keys == 9
    assert plan.mask is not None and plan.mask.tolist() == [[False] + [True] * 8]


def test_full_decode_plan_has_no_mask() -> None:
    plan = make_plan(
        [3, 1], num_cached=5, num_new=1, block_size=4, window=None, device=torch.device("cpu")
    )
    assert plan.blocks.tolist() == [3, 1] and plan.num_keys == 6 and plan.mask is None


def test_prefill_mask_is_causal_and_windowed() -> None:
    plan = make_plan(
        [0, 1], num_cached=0, num_new=6, block_size=4, window=3, device=torch.device("cpu")
    )
    assert plan.mask is not None
    for i in range(6):
        assert plan.mask[i].tolist() == [i - 3 < j <= i for j in range(6)]


def test_attend_with_softcap_and_gqa_matches_naive() -> None:
    torch.manual_seed(0)
    q, k, v = torch.randn(5, 4, 8), torch.randn(7, 2, 8), torch.randn(7, 2, 8)
    mask = torch.ones(5, 7, dtype=torch.bool).tril(diagonal=2)
    for softcap in (None, 2.0):
        got = attend(q, k, v, mask, 0.35, softcap)
        torch.testing.assert_close(got, _naive(q, k, v, mask, 0.35, softcap), rtol=1e-4, atol=1e-5)
