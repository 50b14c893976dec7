"""Which kernel multiplies a batch of activation rows on this machine: measured, not assumed.

Two choices, per weight shape (GGML type, columns) and thread count:

- the native tiled 8-bit matmul (csrc/gemm.c) or the one-row dots (csrc/dot_multi.c): the same
  results bit for bit, so speed alone decides from how many activation rows the tiled one runs
  (`em_set_gemm_min_rows`, one value per process: the crossover over the model's linears);
- for prompt-sized batches (QLinear, from DENSE_PREFILL_TOKENS rows), the native kernels or
  torch's float32 matmul over a transient dequantized copy (MKL/oneDNN), whose activations are
  rounded as the kernels round them (act_rounding), so only float summation order differs;
  where the CPU multiplies bfloat16 in hardware (AMX, AVX-512 BF16, ARM BF16: BF16_FLAGS), also
  bfloat16 matmuls over cache-sized dequantized chunks (layers/bf16_product.py), whose results
  differ from the others by bfloat16 steps.

Each path is timed on a slice of the real weight (at most SLICE_ROWS rows) at two batch sizes
and fitted as seconds per weight row = fixed + per_token * rows of x (decoding or dequantizing
once, then multiplying); a fused linear costs its parts' rows times their fits. Times are the
process's CPU time (all its threads), not wall time: on a busy machine a descheduled thread
stalls a parallel product by whole time slices, often for several runs in a row, and wall time
then measured the machine's other work (a shared 2-core machine at load 11 cached the tiled
matmul as 2.3x slower per token than the one-row dots on the 1.2B model's 8192-column rows,
where it is 2.3x faster). A time is the best of runs repeated for BUDGET_S
(MIN_REPEATS..MAX_REPEATS); a best time no second run came near (within AGREE) is a lucky or a
stalled one: such fits serve this process but are not cached, so the next process measures again.
Fits are cached in a JSON file beside the compiled kernels (under Ember's cache dir), keyed by
the CPU model, the ISA build and its hash (sources, compiler, flags), the thread count, the type
and the columns; a new key is measured on first use (0.1-0.5 s: each path's two sizes, a few
runs each) and never again on this machine.
"""

from __future__ import annotations

import json
import logging
import math
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ember.engine.runners.torch.native import structs as S

if TYPE_CHECKING:
    from ember.engine.runners.torch.native.compile import NativeBuild
    from ember.engine.runners.torch.native.kernels import Kernels

log = logging.getLogger(__name__)

VERSION = 4  # 2: CPU time (1 was wall time); 3: prompt paths apart; 4: gemm timed at 4 and 64 rows
# Weight rows a measurement multiplies (per-row costs are what is fitted). The one-row dots and
# the tiled matmul at a few rows (the crossover between them: "dots", "gemm") on 256 rows, as
# ever. The prompt-sized paths ("native": the kernels at 64-256 rows, "dense", "bf16") on as many
# rows as a real linear has, or nearly: the torch paths pay per call for the whole batch
# (rounding it, converting it, the result's layout), which thousands of rows share, and a small
# slice stays in cache where the whole matrix does not. On 256 rows bf16 looked 5x dearer per
# row than on 2048 (Xeon, the 1.2B model's gate_up, 256 tokens: 37.8 vs 7.7 ns a row and token)
# and the tiled matmul half as dear as on a 3B model's whole 3072 x 8192 down projection; but
# "gemm" fitted on 2048 rows at 16 and 128 tokens grows faster than linearly (the activations
# leave the cache) and its line then undercut the dots at one row: decode steps went tiled and
# the 1.2B model decoded at 0.6x instead of 1.3x llama.cpp's.
SLICE_ROWS = {"dots": 256, "gemm": 256, "native": 2048, "dense": 2048, "bf16": 2048}
MIN_REPEATS, MAX_REPEATS = 3, 20  # runs per time, within BUDGET_S
BUDGET_S = 0.1
AGREE = 1.25
SIZES = {  # activation rows timed
    "dots": (4, 16),
    "gemm": (4, 64),
    "native": (64, 256),
    "dense": (64, 256),
    "bf16": (64, 256),
}
BF16_FLAGS = frozenset({"amx_bf16", "avx512_bf16", "bf16"})  # /proc/cpuinfo: bf16 in hardware
# the builds of CPUs that can have it: a forced avx2 or portable build (EMBER_ISA) runs as a CPU
# without bfloat16 hardware would, so its tests and benchmarks see what such a machine sees
BF16_ISAS = frozenset({"avx512", "neon"})
# weights bfloat16 holds as well as the file does: quantized blocks of 4-6 bit codes (a weight
# rounded to bfloat16 moves by at most 2^-9 of itself: 1/16 of a Q6_K code step at the largest
# code, 1/64 of a Q4 one) and bfloat16 itself; never float32 or float16 files, nor Q8_0, whose
# 127 codes it moves by up to a quarter step (with the bf16 path on its Q8_0 attention the tiny
# gpt-oss flipped an expert choice against llama.cpp: a miss 3.45 logits below its best)
BF16_TYPES = frozenset(S.NATIVE_TYPES - {S.F32, S.F16, S.Q8_0})
FOREVER = 1 << 30

Clock = Callable[[], float]
_MEASURED: dict[
    str, dict[str, dict[str, Fit]]
] = {}  # cache file (or "None") -> fits this process holds
# run(path, one weight matrix, rows of x): one product the way `path` computes it
Run = Callable[[str, S.EmMat, int], None]


@dataclass(frozen=True)
class Fit:
    """Seconds per weight row: fixed (decode or dequantize) + per_token * activation rows."""

    fixed: float
    per_token: float

    def at(self, tokens: int) -> float:
        return self.fixed + self.per_token * tokens


def fit_two(m1: int, t1: float, m2: int, t2: float) -> Fit:
    """The line through (m1, t1) and (m2, t2), neither part negative."""
    per = max((t2 - t1) / (m2 - m1), 0.0)
    return Fit(max(t1 - per * m1, 0.0), per)


class KernelChoice:
    """Measured fits per (type, columns) for the current thread count, cached per machine."""

    def __init__(
        self,
        path: Path | None,
        machine: str,
        run: Run,
        threads: Callable[[], int],
        clock: Clock = time.process_time,
        bf16: bool = False,  # the CPU multiplies bfloat16 in hardware: the bf16 path is a choice
    ) -> None:
        self.path, self.machine, self.run, self.threads, self.clock = (
            path,
            machine,
            run,
            threads,
            clock,
        )
        self.paths = tuple(p for p in SIZES if bf16 or p != "bf16")
        self.fits = _MEASURED.setdefault(str(path), {})  # once per process, saved or not
        self.fits.update(self._load())
        self._crossover: dict[tuple[int, int], int] = {}

    def key(self, qtype: int, cols: int) -> str:
        bf16 = "|bf16" if "bf16" in self.paths else ""
        return f"{self.machine}|t{self.threads()}|q{qtype}|c{cols}{bf16}"

    def part_fits(self, part: S.EmMat) -> dict[str, Fit]:
        """The three paths' fits for this part's type and columns (measured once)."""
        key = self.key(int(part.type), int(part.cols))
        if not set(self.paths) <= set(self.fits.get(key, {})):  # new, or written without a path
            self.fits[key], confirmed = self._measure(part)
            if confirmed:
                self._save(key)
        return self.fits[key]

    def cost(self, desc: S.EmLinear, path: str, tokens: int) -> float:
        """Predicted seconds of one product of `tokens` activation rows by path."""
        return sum(
            desc.part[i].rows * self.part_fits(desc.part[i])[path].at(tokens)
            for i in range(desc.n_parts)
        )

    def prefill_path(self, desc: S.EmLinear, tokens: int) -> str:
        """The cheapest way to multiply this batch: "native" (the kernels, tiled at this size),
        "dense" (float32 matmul) or, where measured and every part's type allows (BF16_TYPES),
        "bf16"; native on a tie."""
        costs = {
            "native": self.cost(desc, "native", tokens),
            "dense": self.cost(desc, "dense", tokens),
        }
        if "bf16" in self.paths and bf16_holds(desc):
            costs["bf16"] = self.cost(desc, "bf16", tokens)
        return min(costs, key=lambda p: (costs[p], p != "native"))

    def gemm_min_rows(self, descs: list[S.EmLinear]) -> int:
        """From how many activation rows the tiled matmul beats the one-row dots over these
        linears (a model's layers), FOREVER where it never does. Both costs are lines in the
        rows (sums of fits), so they cross once: the value serves the native step's few rows
        and prompt-sized batches (QLinear's native path) alike."""
        memo = (self.threads(), len(descs))
        if memo not in self._crossover:
            lines = {
                path: (
                    sum(self.cost(d, path, 0) for d in descs),
                    sum(self.cost(d, path, 1) - self.cost(d, path, 0) for d in descs),
                )
                for path in ("gemm", "dots")
            }
            (g0, g1), (d0, d1) = lines["gemm"], lines["dots"]

            def tiled_wins(m: int) -> bool:
                return g0 + g1 * m <= d0 + d1 * m

            # never below the fewest rows the tiled matmul was timed at: its line through 4
            # and 64 rows says nothing of one (a line through 16 and 128 rows, whose fixed
            # part came out 0, sent the starter's one-token decode steps tiled: 20 tok/s
            # instead of 60, Xeon)
            fewest = SIZES["gemm"][0]
            if tiled_wins(fewest):
                rows = fewest
            elif g1 >= d1:
                rows = FOREVER  # dearer where timed and per row
            else:  # the first m where the lines cross (rounding checked both ways)
                rows = min(FOREVER, max(fewest, math.ceil((g0 - d0) / (d1 - g1))))
                while rows > fewest and tiled_wins(rows - 1):
                    rows -= 1
                while rows < FOREVER and not tiled_wins(rows):
                    rows += 1
            self._crossover[memo] = rows
        return self._crossover[memo]

    def _measure(self, part: S.EmMat) -> tuple[dict[str, Fit], bool]:
        """The fits, and whether every time in them was confirmed by a second run."""
        fits, confirmed = {}, True
        for path in self.paths:
            m1, m2 = SIZES[path]
            rows = min(int(part.rows), SLICE_ROWS[path])
            sliced = S.EmMat(part.data, part.row_bytes, part.type, rows, part.cols, 0)
            (t1, ok1), (t2, ok2) = self._time(path, sliced, m1), self._time(path, sliced, m2)
            fits[path] = fit_two(m1, t1 / rows, m2, t2 / rows)
            confirmed = confirmed and ok1 and ok2
        log.info(
            "kernel choice: measured type %d x %d columns on %d threads: %s",
            part.type,
            part.cols,
            self.threads(),
            fits,
        )
        return fits, confirmed

    def _time(self, path: str, part: S.EmMat, tokens: int) -> tuple[float, bool]:
        """The best time of one product, and whether a second run came within AGREE of it."""
        self.run(path, part, tokens)  # warm: pages, buffers, thread pool
        times: list[float] = []
        while len(times) < MAX_REPEATS and (len(times) < MIN_REPEATS or sum(times) < BUDGET_S):
            start = self.clock()
            self.run(path, part, tokens)
            times.append(self.clock() - start)
        best = min(times)
        return best, sum(t <= best * AGREE for t in times) >= 2

    def _load(self, quiet: bool = False) -> dict[str, dict[str, Fit]]:
        if self.path is None or not self.path.is_file():
            return {}
        try:
            data = json.loads(self.path.read_text())
            if data.get("version") != VERSION:
                return {}
            return {
                key: {path: Fit(float(f[0]), float(f[1])) for path, f in paths.items()}
                for key, paths in data["fits"].items()
            }
        except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
            if not quiet:
                log.warning("%s: unreadable kernel choices (%s); measuring again", self.path, exc)
            return {}

    def _save(self, key: str) -> None:
        """Merge this key into the file (other processes may have added theirs) atomically."""
        if self.path is None:
            return
        merged = {**self._load(quiet=True), key: self.fits[key]}
        data = {
            "version": VERSION,
            "fits": {
                k: {p: [f.fixed, f.per_token] for p, f in v.items()} for k, v in merged.items()
            },
        }
        tmp = ""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".choice.", dir=self.path.parent)
            with os.fdopen(fd, "w") as f:
                json.dump(data, f, indent=1, sort_keys=True)
            os.replace(tmp, self.path)
        except OSError as exc:
            log.warning("%s: could not save kernel choices (%s)", self.path, exc)
        finally:
            if tmp:
                Path(tmp).unlink(missing_ok=True)


def kernel_run(kernels: Kernels) -> Run:
    """The real products: the one-row dots, the tiled matmul, dequantize + float32 matmul
    (QLinear's dense prefill path) or bfloat16 chunks (bf16_product), on random activations."""
    import torch

    from ember.engine.runners.torch.layers.act_rounding import dense_product, output_blocks
    from ember.engine.runners.torch.layers.bf16_product import bf16_product
    from ember.engine.runners.torch.native.kernels import NativeLinear

    xs: dict[tuple[int, int], torch.Tensor] = {}

    def run(path: str, part: S.EmMat, tokens: int) -> None:
        desc = S.EmLinear()
        desc.part[0], desc.n_parts, desc.out_features = part, 1, part.rows
        lin = NativeLinear(desc)
        if (tokens, part.cols) not in xs:
            xs[tokens, part.cols] = torch.randn(tokens, part.cols)
        x = xs[tokens, part.cols]
        if path == "dense":
            dense_product(x, kernels.dequantize(lin), output_blocks(lin))
            return
        if path == "bf16":
            bf16_product(kernels, lin, x)
            return
        with kernels.gemm_rows(1 if path in ("gemm", "native") else FOREVER):
            kernels.linear(lin, x)

    return run


def bf16_holds(desc: S.EmLinear) -> bool:
    """Whether bfloat16 holds every part of this linear as well as the file does (BF16_TYPES)."""
    return all(int(desc.part[i].type) in BF16_TYPES for i in range(desc.n_parts))


def offers_bf16(isa: str, flags: frozenset[str] | set[str]) -> bool:
    """Whether the bf16 path is one of the choices: bfloat16 hardware under an ISA build that
    goes with it."""
    return isa in BF16_ISAS and bool(BF16_FLAGS & flags)


def measured_choice(kernels: Kernels, build: NativeBuild, cache_dir: Path | None) -> KernelChoice:
    """The choice for this library on this machine, its fits cached in cache_dir (the compiled
    kernels' folder; None: the private temporary folder they use then)."""
    import torch

    from ember.engine.runners.torch.native.compile import _private_temp_dir
    from ember.engine.runners.torch.native.isa import this_cpu

    root = cache_dir
    if root is None:
        root, problem = _private_temp_dir()
        if problem:
            root = None
    # the build's hash too: a kernel that changed is measured again, not judged by the old fits
    machine = f"{this_cpu().model}|{build.isa}|{build.features}|{build.key}"
    path = root / "kernel_choice.json" if root is not None else None
    bf16 = offers_bf16(build.isa, this_cpu().flags)
    return KernelChoice(path, machine, kernel_run(kernels), torch.get_num_threads, bf16=bf16)
