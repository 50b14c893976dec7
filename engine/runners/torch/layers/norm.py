"""RMSNorm; Gemma's (1 + w) form is folded into w when weights load (offset added once)."""

from __future__ import annotations

import torch
from torch import nn


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * w over the last dim, computed in float32."""

    def __init__(self, weight: torch.Tensor, eps: float, offset: float = 0.0) -> None:
        super().__init__()
        self.weight = (weight.float() + offset).contiguous()  # offset 1.0: Gemma's (1 + w)
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (xf * self.weight).to(x.dtype)
