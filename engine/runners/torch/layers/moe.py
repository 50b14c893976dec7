"""A mixture-of-experts FFN: a router scores E experts per token, the top k run, their outputs
are summed with the router's weights.

Routing (Qwen3-MoE, llama.cpp's qwen3moe): p = softmax(x R^T [+ b]) over all E experts in float32,
take the k largest, and with norm_topk_prob divide them by their sum. Experts stay in the form the
model file has them (GGUF blocks in the mmap under the native kernels); an expert is turned into
its layers the first time a token chooses it, so an expert never chosen is never read and
resident memory follows the experts in use.

Every step groups its (token, expert) pairs by expert: the tokens routed to one expert are
gathered into one batch and go through that expert's matrices in one call (a decode token is a
batch of one per chosen expert), then are scattered back, weighted, with index_add_.

Under the native kernels the whole routed FFN (routing included) is one call into csrc/moe.c
(native/moe.py), which reads the chosen experts' rows straight from the stacked tensors in the
mmap; the torch modules below are then not built at all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from ember.engine.runners.torch.layers.linear import QLinear

if TYPE_CHECKING:
    from ember.engine.runners.torch.native.moe import NativeMoE


@dataclass
class Expert:
    """One expert's matrices: gate and up fused (2 * width, hidden), down (hidden, width)."""

    gate_up: QLinear
    down: QLinear

    def __call__(self, x: torch.Tensor, gelu: bool) -> torch.Tensor:  # (T, hidden) -> (T, hidden)
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        act = F.gelu(gate, approximate="tanh") if gelu else F.silu(gate)
        return self.down(act * up)


class MoEFFN(nn.Module):
    """The routed FFN of one layer; experts are built by make_expert on first use (or the whole
    layer runs natively when `native` is given)."""

    def __init__(
        self,
        router: torch.Tensor,  # (E, hidden) float32
        router_bias: torch.Tensor | None,  # (E,) float32
        n_used: int,
        norm_topk_prob: bool,
        make_expert: Callable[[int], Expert],
        gelu: bool = False,
        native: NativeMoE | None = None,
    ) -> None:
        super().__init__()
        self.router, self.router_bias = router, router_bias
        self.n_experts, self.n_used = router.shape[0], n_used
        self.norm_topk_prob, self.gelu = norm_topk_prob, gelu
        self.make_expert, self.native = make_expert, native
        self.experts: list[Expert | None] = [None] * self.n_experts

    def expert(self, e: int) -> Expert:
        """Expert e, built (its weights first touched) when a token first chooses it."""
        built = self.experts[e]
        if built is None:
            built = self.experts[e] = self.make_expert(e)
        return built

    @property
    def n_built(self) -> int:
        """How many experts tokens have chosen so far (the rest were never read)."""
        if self.native is not None:
            return self.native.n_chosen
        return sum(e is not None for e in self.experts)

    def route(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(weights (N, k) float32, expert ids (N, k) int64) for x (N, hidden)."""
        logits = F.linear(x.float(), self.router, self.router_bias)
        probs = torch.softmax(logits, dim=-1)
        weights, ids = probs.topk(self.n_used, dim=-1)
        if self.norm_topk_prob:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        return weights, ids

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (N, hidden) -> (N, hidden)
        if self.native is not None:
            return self.native.forward(x).to(x.dtype)
        weights, ids = self.route(x)
        k = self.n_used
        if x.shape[0] == 1:  # decode: one token, k experts, no sorting
            out = torch.zeros(1, x.shape[1], dtype=torch.float32, device=x.device)
            for w, e in zip(weights[0].tolist(), ids[0].tolist(), strict=True):
                out.add_(self.expert(e)(x, self.gelu).float(), alpha=w)
            return out.to(x.dtype)
        flat = ids.reshape(-1)  # (N * k,) pair j is token j // k
        order = torch.argsort(flat, stable=True)  # pairs sorted by expert
        counts = torch.bincount(flat, minlength=self.n_experts).tolist()
        tokens = order // k
        pair_w = weights.reshape(-1).index_select(0, order)[:, None]
        xs = x.index_select(0, tokens)  # the tokens, grouped by expert
        out = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
        start = 0
        for e, count in enumerate(counts):
            if count:
                part = slice(start, start + count)
                y = self.expert(e)(xs[part], self.gelu).float()
                out.index_add_(0, tokens[part], y * pair_w[part])
                start += count
        return out.to(x.dtype)
