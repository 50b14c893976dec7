"""A linear layer whose weight is dense, int8 per channel, int4 group-32, 8-bit group-32, or
"gguf": the file's own blocks multiplied in place by the native kernels (native/)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
from torch import nn

from ember.engine.runners.torch.layers.act_rounding import (
    block_of,
    dense_product,
    output_blocks,
    rounded,
)
from ember.engine.runners.torch.layers.bf16_product import bf16_product
from ember.engine.runners.torch.layers.pack import Int4Weight, Int8Weight, int4_matmul, int8_matmul

if TYPE_CHECKING:
    from ember.engine.runners.torch.native.kernels import Kernels, NativeLinear

WEIGHT_FORMATS = ("dense", "int8", "int4", "int8g")
DENSE_PREFILL_TOKENS = 64  # from this many tokens on, a dense matmul is considered (measured)
MAX_TRANSIENT_BYTES = 64 << 20  # a native weight larger than this as float32 is never densified

DenseFn = Callable[[], torch.Tensor]  # rebuilds the float32 (out, in) weight from the file


class QLinear(nn.Module):
    """y = x W^T + b with W in one of WEIGHT_FORMATS (set exactly one of dense/q8/q4)."""

    def __init__(
        self,
        out_features: int,
        in_features: int,
        bias: torch.Tensor | None,
        dtype: torch.dtype,
        dense: torch.Tensor | None = None,
        q8: Int8Weight | None = None,
        q4: Int4Weight | None = None,  # int4; or int8g: low and high planes side by side (N, 2K)
        fmt: str = "int4",  # for q4: int4 or int8g
        dense_fn: DenseFn | None = None,  # for prefill: the float weight straight from the file
    ) -> None:
        super().__init__()
        self.out_features, self.in_features = out_features, in_features
        self.dtype = dtype
        self.bias = bias.to(dtype) if bias is not None else None
        self.dense, self.q8, self.q4, self.dense_fn = dense, q8, q4, dense_fn
        self.fmt = "dense" if dense is not None else "int8" if q8 is not None else fmt
        self.native: NativeLinear | None = None
        self.kernels: Kernels | None = None

    @classmethod
    def from_native(
        cls, native: NativeLinear, kernels: Kernels, bias: torch.Tensor | None
    ) -> QLinear:
        """The GGUF blocks in place: small batches through the native kernels (8-bit activation
        blocks, bias included), large ones as float32 matmuls of the same 8-bit-rounded
        activations (act_rounding) over a transient dequantized copy (in row chunks where that
        copy would be large, like a 262k-token LM head)."""
        layer = cls(native.out_features, native.in_features, bias, torch.float32, fmt="gguf")
        layer.native, layer.kernels = native, kernels
        return layer

    def state(self) -> dict[str, object]:
        """The converted weight (tensors and format), for the packed-weight cache."""
        if self.native is not None:
            return {"fmt": "gguf"}  # nothing converted: the file's bytes are the weight
        if self.dense is not None:
            return {"fmt": "dense", "dense": self.dense}
        if self.q8 is not None:
            return {"fmt": "int8", "q": self.q8.q, "scales": self.q8.scales}
        assert self.q4 is not None
        return {"fmt": self.fmt, "packed": self.q4.packed, "scales_zeros": self.q4.scales_zeros}

    @classmethod
    def from_state(
        cls,
        state: dict[str, object],
        out_features: int,
        in_features: int,
        bias: torch.Tensor | None,
        dtype: torch.dtype,
        dense_fn: DenseFn | None,
    ) -> QLinear:
        """Inverse of state() (tensors may be mmap-backed: they are used in place)."""
        fmt, t = state["fmt"], {k: v for k, v in state.items() if isinstance(v, torch.Tensor)}
        if fmt == "dense":
            return cls(out_features, in_features, bias, dtype, dense=t["dense"])
        if fmt == "int8":
            return cls(out_features, in_features, bias, dtype, q8=Int8Weight(t["q"], t["scales"]))
        k = in_features * (2 if fmt == "int8g" else 1)
        q4 = Int4Weight(t["packed"], t["scales_zeros"], out_features, k)
        return cls(out_features, in_features, bias, dtype, q4=q4, fmt=str(fmt), dense_fn=dense_fn)

    def _chunked_float(self, x: torch.Tensor) -> torch.Tensor:  # (T, in) -> (T, out)
        """A large batch against a weight too large to densify whole (a 262k-row LM head asked
        for every position's logits): float32 matmuls over transient dequantized row chunks of
        MAX_TRANSIENT_BYTES, over activations rounded as the kernels round them (act_rounding)."""
        assert self.native is not None and self.kernels is not None
        if self.native.desc.n_parts != 1 or self.native.desc.out_map:
            return self.kernels.linear(self.native, x)
        x, rows = x.float(), max(1, MAX_TRANSIENT_BYTES // (4 * self.in_features))
        x = rounded(x, block_of(self.native.desc.part[0].type))  # as the kernels see it
        y = torch.empty(x.shape[0], self.out_features, dtype=torch.float32)
        for r in range(0, self.out_features, rows):
            w = self.kernels.dequantize_rows(self.native, r, rows)
            y[:, r : r + w.shape[0]] = x @ w.t()
        return y + self.bias if self.bias is not None else y

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (T, in) -> (T, out)
        if self.native is not None:
            assert self.kernels is not None
            m = x.shape[0]
            path = (
                "native" if m < DENSE_PREFILL_TOKENS else self.kernels.prefill_path(self.native, m)
            )
            if path == "native":
                return self.kernels.linear(self.native, x)  # bias added by the kernel
            if path == "bf16":
                y = bf16_product(self.kernels, self.native, x)
            elif 4 * self.out_features * self.in_features > MAX_TRANSIENT_BYTES:
                return self._chunked_float(x)
            else:
                w = self.kernels.dequantize(self.native)
                y = dense_product(x.float(), w, output_blocks(self.native))
        elif self.dense is not None:
            y = torch.nn.functional.linear(x, self.dense)
        elif self.dense_fn is not None and x.shape[0] >= DENSE_PREFILL_TOKENS:
            y = torch.nn.functional.linear(x, self.dense_fn().to(device=x.device, dtype=x.dtype))
        elif self.q8 is not None:
            if x.shape[0] >= DENSE_PREFILL_TOKENS:
                y = torch.nn.functional.linear(x, self.q8.dequantize(x.dtype))
            else:
                y = int8_matmul(x, self.q8)
        else:
            assert self.q4 is not None
            # int8g: one kernel call over both planes, x (T, K) repeated along K to (T, 2K)
            y = int4_matmul(torch.cat((x, x), dim=-1) if self.fmt == "int8g" else x, self.q4)
        return y + self.bias if self.bias is not None else y
