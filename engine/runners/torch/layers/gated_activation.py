"""The gated activations of an FFN: act(gate) * up, and gpt-oss's clamped SwiGLU variant.

    silu       silu(gate) * up
    gelu_tanh  gelu_tanh(gate) * up                           (gemma)
    swiglu_oai g = min(gate, limit), u = clamp(up, -limit, limit),
               g * sigmoid(alpha * g) * (u + 1)               (gpt-oss: alpha 1.702, limit 7)

swiglu_oai is llama.cpp's ggml_swiglu_oai and transformers' GptOssExperts._apply_gate: the gate
is clamped from above only, the up projection on both sides, and up is shifted by one so a zero
up projection passes the gate through.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

KINDS = ("silu", "gelu_tanh", "swiglu_oai")


@dataclass(frozen=True)
class GatedActivation:
    """One FFN's act(gate, up); alpha and limit are swiglu_oai's."""

    kind: str = "silu"
    alpha: float = 1.702
    limit: float = 7.0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"activation {self.kind!r}: one of {KINDS}")

    def __call__(self, gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:  # (T, F) each
        if self.kind == "silu":
            return F.silu(gate) * up
        if self.kind == "gelu_tanh":
            return F.gelu(gate, approximate="tanh") * up
        g = gate.float().clamp(max=self.limit)
        u = up.float().clamp(-self.limit, self.limit)
        return (g * torch.sigmoid(self.alpha * g) * (u + 1.0)).to(gate.dtype)
