"""A linear layer whose weight is dense (f32/bf16/f16), int8 per channel or int4 group-32."""

from __future__ import annotations

import torch
from torch import nn

from ember.engine.runners.torch.layers.pack import (
    Int4Weight,
    Int8Weight,
    int4_matmul,
    int8_matmul,
    quantize_int4,
    quantize_int8,
)

WEIGHT_FORMATS = ("dense", "int8", "int4")
DENSE_PREFILL_TOKENS = 32  # from this many tokens on, a quantized layer dequantizes and runs dense


class QLinear(nn.Module):
    """y = x W^T + b with W stored in one of WEIGHT_FORMATS."""

    def __init__(
        self,
        weight: torch.Tensor,  # (out, in) float
        bias: torch.Tensor | None,
        fmt: str,
        dtype: torch.dtype,
        device: torch.device,
    ) -> None:
        super().__init__()
        if fmt == "int4" and weight.shape[1] % 32:
            fmt = "int8"  # int4 groups need in_features % 32 == 0
        self.fmt = fmt
        self.dtype = dtype
        self.out_features, self.in_features = weight.shape
        self.bias = bias.to(device=device, dtype=dtype) if bias is not None else None
        self.dense: torch.Tensor | None = None
        self.q8: Int8Weight | None = None
        self.q4: Int4Weight | None = None
        if fmt == "dense":
            self.dense = weight.to(device=device, dtype=dtype).contiguous()
        elif fmt == "int8":
            self.q8 = quantize_int8(weight.to(device), dtype)
        elif fmt == "int4":
            self.q4 = quantize_int4(weight.to(device), dtype)
        else:
            raise ValueError(f"weight format {fmt!r}: use one of {WEIGHT_FORMATS}")

    def weight(self) -> torch.Tensor:
        """The dense (out, in) weight in the compute dtype (dequantized on demand)."""
        if self.dense is not None:
            return self.dense
        packed = self.q8 if self.q8 is not None else self.q4
        assert packed is not None
        return packed.dequantize(self.dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (T, in) -> (T, out)
        if self.dense is not None or x.shape[0] >= DENSE_PREFILL_TOKENS:
            y = torch.nn.functional.linear(x, self.weight())
        elif self.q8 is not None:
            y = int8_matmul(x, self.q8)
        else:
            assert self.q4 is not None
            y = int4_matmul(x, self.q4)
        return y + self.bias if self.bias is not None else y
