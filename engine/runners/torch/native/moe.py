"""A MoE layer's routed FFN as one native call (csrc/moe.c): the em_moe over the file's stacked
expert tensors, and the prefill-sized call the torch modules make."""

from __future__ import annotations

import ctypes as C
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from ember.engine.runners.torch.native import structs as S
from ember.engine.runners.torch.native.kernels import float_ptr, mat_of

MAX_TOKENS_PER_CALL = 512  # longer batches go in chunks (the pair buffers grow with tokens)


class EmMoe(C.Structure):
    """ctypes mirror of csrc/moe.h's em_moe (keep the field order identical)."""

    _fields_ = [
        ("n_experts", C.c_int32),
        ("n_used", C.c_int32),
        ("norm_topk", C.c_int32),
        ("act", C.c_int32),
        ("hidden", C.c_int32),
        ("ffn", C.c_int32),
        ("router", S.EmMat),
        ("router_bias", S.F32P),
        ("gate", S.EmMat),
        ("up", S.EmMat),
        ("down", S.EmMat),
        ("usage", S.I64P),
    ]


def _stack(raw: Any, qtype: int, shape: tuple[int, ...]) -> S.EmMat:
    """An (E, out, in) expert stack as one (E * out, in) matrix: expert e is rows e*out .."""
    n_experts, out, cols = shape
    return mat_of(raw, qtype, (n_experts * out, cols))


class NativeMoE:
    """One layer's em_moe plus what keeps its memory alive; `chosen` counts each expert's picks
    (a view of `usage`: picks, the token count at each expert's last pick, tokens routed)."""

    def __init__(
        self,
        lib: C.CDLL,
        router: torch.Tensor,  # (E, hidden) float32
        router_bias: torch.Tensor | None,  # (E,) float32
        experts: Mapping[
            str, tuple[Any, int, tuple[int, ...]]
        ],  # gate/up/down: (raw, qtype, shape)
        n_used: int,
        norm_topk_prob: bool,
        gelu: bool,
    ) -> None:
        self.lib = lib
        declare(lib)
        router = router.float().contiguous()
        bias = None if router_bias is None else router_bias.float().contiguous()
        n_experts, hidden = router.shape
        self.usage = np.zeros(2 * n_experts + 1, dtype=np.int64)
        self.chosen = self.usage[:n_experts]
        self.keep = [router, bias, self.usage, *(raw for raw, _, _ in experts.values())]
        d = self.desc = EmMoe()
        d.n_experts, d.n_used, d.norm_topk, d.act = (
            n_experts,
            n_used,
            int(norm_topk_prob),
            int(gelu),
        )
        d.hidden, d.ffn = hidden, experts["gate"][2][1]
        d.router = mat_of(router, S.F32, (n_experts, hidden))
        d.router_bias = float_ptr(bias)
        d.gate, d.up, d.down = (_stack(*experts[k]) for k in ("gate", "up", "down"))
        d.usage = self.usage.ctypes.data_as(S.I64P)

    @property
    def n_chosen(self) -> int:
        """How many experts tokens have chosen so far (the rest were never read)."""
        return int(np.count_nonzero(self.chosen))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (N, hidden) -> (N, hidden) float32
        x = x.float().contiguous()
        y = torch.empty_like(x)
        threads = torch.get_num_threads()
        for start in range(0, x.shape[0], MAX_TOKENS_PER_CALL):
            part = x[start : start + MAX_TOKENS_PER_CALL]
            out = y[start : start + MAX_TOKENS_PER_CALL]
            rc = self.lib.em_moe_forward(
                C.byref(self.desc), part.data_ptr(), part.shape[0], out.data_ptr(), threads
            )
            if rc != 0:
                raise MemoryError("native MoE: out of memory")
        return y


def declare(lib: C.CDLL) -> None:
    """em_moe_forward's argument and result types."""
    lib.em_moe_forward.argtypes = [C.POINTER(EmMoe), C.c_void_p, C.c_int32, C.c_void_p, C.c_int32]
    lib.em_moe_forward.restype = C.c_int
