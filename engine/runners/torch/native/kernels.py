"""Python handles on the native kernels: GGUF matrices as em_mat views of the file's mmap,
fused linears, and the calls the torch modules make (x W^T, rows dequantized to float32)."""

from __future__ import annotations

import ctypes as C
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ember.engine.runners.torch.native import structs as S
from ember.engine.runners.torch.native.compile import NativeBuild, load_library
from ember.engine.runners.torch.native.isa import choose

if TYPE_CHECKING:
    from ember.engine.runners.torch.native.choice import KernelChoice

log = logging.getLogger(__name__)
_lock = threading.Lock()
_loaded: dict[str, NativeBuild] = {}


def native_build(cache_dir: Path | None, isa: str | None = None) -> NativeBuild:
    """The process's native library (built or loaded once per cache folder and ISA; isa None:
    EMBER_ISA, else the best this CPU runs). Where it cannot be built, one warning line says
    why and that the runner falls back to torch's kernels."""
    key = f"{cache_dir}|{choose(isa).name}"
    with _lock:
        if key not in _loaded:
            build = load_library(cache_dir, isa)
            if build.lib is not None:
                S.declare(build.lib)
            elif build.reason != "EMBER_NATIVE=off":
                log.warning(
                    "torch runner: native CPU kernels unavailable (%s); using torch's kernels "
                    "(slower, see README: ember bench)",
                    build.reason,
                )
            _loaded[key] = build
        return _loaded[key]


def mat_of(raw: Any, qtype: int, shape: tuple[int, ...]) -> S.EmMat:
    """An em_mat over a (rows, cols) tensor's bytes (a numpy array or a contiguous CPU tensor;
    the caller keeps it alive)."""
    rows, cols = shape
    if isinstance(raw, torch.Tensor):
        if not raw.is_contiguous() or raw.device.type != "cpu":
            raise ValueError("native matrices must be contiguous CPU tensors")
        ptr, nbytes = raw.data_ptr(), raw.numel() * raw.element_size()
    else:
        ptr, nbytes = raw.ctypes.data, raw.nbytes
    if qtype not in S.NATIVE_TYPES or cols % S.BLOCK_COLS.get(qtype, 1):
        raise ValueError(f"type {qtype} with {cols} columns has no native kernel")
    return S.EmMat(ptr, nbytes // rows, qtype, rows, cols, 0)


def float_ptr(t: torch.Tensor | None) -> Any:
    """float* of a contiguous float32 tensor (NULL for None)."""
    if t is None:
        return None
    assert t.dtype == torch.float32 and t.is_contiguous()
    return C.cast(t.data_ptr(), S.F32P)


@dataclass
class NativeLinear:
    """A fused em_linear plus what keeps its memory alive."""

    desc: S.EmLinear
    keep: list[Any] = field(default_factory=list)

    @property
    def out_features(self) -> int:
        return int(self.desc.out_features)

    @property
    def in_features(self) -> int:
        return int(self.desc.part[0].cols)

    def out_permutation(self) -> torch.Tensor | None:
        """The output order (part row i is output out_map[i]) as int64 indices, or None where
        the parts' rows are already the outputs in order."""
        if not self.desc.out_map:
            return None
        return torch.from_numpy(
            np.ctypeslib.as_array(self.desc.out_map, (self.out_features,))
        ).long()


def make_linear(
    parts: list[tuple[Any, int, tuple[int, ...]]],
    bias: torch.Tensor | None = None,
    out_map: np.ndarray | None = None,
) -> NativeLinear:
    """Fuse (raw, qtype, (rows, cols)) parts along the outputs."""
    if not 1 <= len(parts) <= S.MAX_PARTS:
        raise ValueError(f"a native linear takes 1..{S.MAX_PARTS} parts, got {len(parts)}")
    desc = S.EmLinear()
    keep: list[Any] = [raw for raw, _, _ in parts]
    for i, (raw, qtype, shape) in enumerate(parts):
        desc.part[i] = mat_of(raw, qtype, shape)
    desc.n_parts = len(parts)
    desc.out_features = sum(shape[0] for _, _, shape in parts)
    if bias is not None:
        b = bias.float().contiguous()
        keep.append(b)
        desc.bias = float_ptr(b)
    if out_map is not None:
        m = np.ascontiguousarray(out_map, dtype=np.int32)
        keep.append(m)
        desc.out_map = m.ctypes.data_as(S.I32P)
    return NativeLinear(desc, keep)


class Kernels:
    """The calls torch-side code makes into the library."""

    def __init__(self, lib: C.CDLL) -> None:
        self.lib = lib
        self.choice: KernelChoice | None = None  # measured kernel choices (runner sets it)
        self.gemm_min_rows = int(lib.em_gemm_min_rows())

    def set_gemm_min_rows(self, rows: int) -> None:
        """From how many activation rows native linears run the tiled matmul (gemm.c) instead
        of the one-row dots: the same results bit for bit, so a speed choice (choice.py)."""
        if rows != self.gemm_min_rows:
            self.lib.em_set_gemm_min_rows(rows)
            self.gemm_min_rows = rows

    @contextmanager
    def gemm_rows(self, rows: int) -> Iterator[None]:
        """set_gemm_min_rows(rows) for the block, then back."""
        before = self.gemm_min_rows
        self.set_gemm_min_rows(rows)
        try:
            yield
        finally:
            self.set_gemm_min_rows(before)

    def tune(self, descs: list[S.EmLinear]) -> None:
        """Set the measured crossover to the tiled matmul over these linears (a model's layers)
        at the current thread count: measured on first use, then a dictionary lookup."""
        if self.choice is not None:
            self.set_gemm_min_rows(self.choice.gemm_min_rows(descs))

    def prefill_path(self, w: NativeLinear, rows: int) -> str:
        """How a batch of `rows` activation rows runs fastest here: "native", "dense" (float32
        matmul) or "bf16" (choice.py, measured; without a choice, dense, as before it existed)."""
        return "dense" if self.choice is None else self.choice.prefill_path(w.desc, rows)

    def linear(self, w: NativeLinear, x: torch.Tensor) -> torch.Tensor:
        """x (M, in) float32 -> (M, out) float32 = x W^T (+ b), 8-bit activations."""
        x = x.contiguous()
        if x.dtype != torch.float32:
            x = x.float()
        m = x.shape[0]
        y = torch.empty(m, w.out_features, dtype=torch.float32)
        rc = self.lib.em_linear_forward(
            C.byref(w.desc),
            x.data_ptr(),
            x.stride(0),
            m,
            y.data_ptr(),
            y.stride(0),
            torch.get_num_threads(),
        )
        if rc != 0:
            raise MemoryError("native linear: out of memory")
        return y

    def dequantize(self, w: NativeLinear) -> torch.Tensor:
        """The fused weight as float32 (out, in), part by part (prefill's transient copy)."""
        out = torch.empty(w.out_features, w.in_features, dtype=torch.float32)
        row, threads = 0, torch.get_num_threads()
        for i in range(w.desc.n_parts):
            part = w.desc.part[i]
            self.lib.em_dequant_rows(C.byref(part), 0, part.rows, out[row].data_ptr(), threads)
            row += part.rows
        perm = w.out_permutation()
        if perm is not None:  # the bias is added by the caller's linear
            out = torch.empty_like(out).index_copy_(0, perm, out)
        return out

    def dequantize_rows(self, w: NativeLinear, row0: int, n_rows: int) -> torch.Tensor:
        """Rows row0 .. row0 + n_rows of a single-part weight without an output permutation
        (an LM head) as float32 (n_rows, in)."""
        assert w.desc.n_parts == 1 and not w.desc.out_map
        part = w.desc.part[0]
        n_rows = min(n_rows, int(part.rows) - row0)
        out = torch.empty(n_rows, w.in_features, dtype=torch.float32)
        self.lib.em_dequant_rows(
            C.byref(part), row0, n_rows, out.data_ptr(), torch.get_num_threads()
        )
        return out

    def dequantize_bf16(
        self, part: S.EmMat, row0: int, out: torch.Tensor, scratch: torch.Tensor
    ) -> None:
        """Rows row0 .. row0 + len(out) of one matrix into out (n, cols) bfloat16: float32 as
        dequantize() gives them, rounded to nearest even (scratch: float32, threads * cols)."""
        threads = torch.get_num_threads()
        assert out.dtype == torch.bfloat16 and out.is_contiguous() and out.shape[1] == part.cols
        assert scratch.dtype == torch.float32 and scratch.numel() >= threads * part.cols
        assert 0 <= row0 and row0 + out.shape[0] <= part.rows
        self.lib.em_dequant_rows_bf16(
            C.byref(part), row0, out.shape[0], out.data_ptr(), scratch.data_ptr(), threads
        )

    def gather(self, mat: S.EmMat, ids: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
        """Rows ids (int) of mat as float32 (len(ids), cols), times scale."""
        idx = np.ascontiguousarray(ids.cpu().numpy(), dtype=np.int32)
        out = torch.empty(len(idx), mat.cols, dtype=torch.float32)
        self.lib.em_gather_rows(
            C.byref(mat), idx.ctypes.data_as(S.I32P), len(idx), out.data_ptr(), scale
        )
        return out


def layer_descs(model: torch.nn.Module) -> list[S.EmLinear]:
    """The native linears of a model's decoder layers (LayerWeights fields; the LM head, which
    multiplies one row a step, and MoE experts aside)."""
    out = []
    for layer in getattr(model, "layers", []):
        for part in vars(getattr(layer, "w", object())).values():
            native = getattr(part, "native", None)
            if isinstance(native, NativeLinear):
                out.append(native.desc)
    return out
