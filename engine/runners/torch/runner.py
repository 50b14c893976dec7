"""TorchRunner: our transformer over a paged KV store, behind the engine's Runner protocol."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ember.engine.errors import EngineError
from ember.engine.runners.base import ForwardBatch, RunnerInfo, SeqStep
from ember.engine.runners.thread_governor import ThreadGovernor
from ember.engine.runners.torch import cuda_graphs
from ember.engine.runners.torch.build import (
    BuildOptions,
    build_model,
    native_ready,
    native_step_ready,
)
from ember.engine.runners.torch.cuda_graphs import DecodeGraphs
from ember.engine.runners.torch.device_decode import decode_batch, one_token_steps
from ember.engine.runners.torch.kv_choice import torch_kv_dtype
from ember.engine.runners.torch.kv_store import KVStore
from ember.engine.runners.torch.layers.attention import AttnPlan, make_plan
from ember.engine.runners.torch.layers.rope import apply_rope
from ember.engine.runners.torch.loader import ModelSource, open_model
from ember.engine.runners.torch.model import StepContext, Transformer
from ember.engine.runners.torch.ropes import build_ropes, query_temperature, step_tables

if TYPE_CHECKING:
    from ember.engine.api import EngineOptions, Progress
    from ember.engine.runners.torch.native.kernels import Kernels
    from ember.engine.runners.torch.native.model import NativeModel
    from ember.models.text.tokenizers.base import Tokenizer

log = logging.getLogger(__name__)

NATIVE_MAX_TOKENS = 64  # steps with fewer tokens run as one native call; longer ones on torch
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True)
class TorchOptions:
    """Torch-runner knobs beyond EngineOptions (tests ask for float32 and dense weights)."""

    device: str = "auto"  # auto | cpu | cuda | mps
    dtype: str = (
        "auto"  # auto (bfloat16 on cpu/cuda, float16 on mps) | float32 | bfloat16 | float16
    )
    weight_format: str = "auto"  # auto | dense | int8 | int4
    head_format: str = "auto"
    threads: int = 0  # 0 = auto on the CPU: the cores free now, re-measured (ThreadGovernor)
    packed_cache_dir: str = ""  # map converted weights from here (packed_cache.py); "" = off
    kernels: str = "auto"  # auto | native | torch: the CPU's GGUF kernels (native/) or torch's
    kv_dtype: str = "auto"  # auto (float16 with native kernels, else dtype) | float16 | bfloat16
    # | float32 | int8 (int8 codes with a float32 scale per token and head)

    def __post_init__(self) -> None:
        if self.kernels not in ("auto", "native", "torch"):
            raise EngineError(f"kernels {self.kernels!r}: use auto, native or torch")
        if self.kv_dtype not in ("auto", "int8", *_DTYPES):
            raise EngineError(
                f"kv_dtype {self.kv_dtype!r}: use auto, float16, bfloat16, float32 or int8"
            )

    def resolve_kv_dtype(self, compute: torch.dtype, native: bool) -> torch.dtype:
        """The KV pools' element type (auto: float16 like llama.cpp's cache under the native
        kernels, the compute dtype otherwise)."""
        if self.kv_dtype == "int8":
            return torch.int8
        if self.kv_dtype != "auto":
            return _DTYPES[self.kv_dtype]
        return torch.float16 if native and self.dtype == "auto" else compute

    def resolve_device(self) -> torch.device:
        """The concrete device; EngineError when the requested one is absent."""
        want = self.device
        if want == "auto":
            want = (
                "cuda"
                if torch.cuda.is_available()
                else "mps"
                if torch.backends.mps.is_available()
                else "cpu"
            )
        if want == "cuda" and not torch.cuda.is_available():
            raise EngineError("device cuda: no CUDA device is available")
        if want == "mps" and not torch.backends.mps.is_available():
            raise EngineError("device mps: Metal (MPS) is not available")
        if want not in ("cpu", "cuda", "mps"):
            raise EngineError(f"device {want!r}: use auto, cpu, cuda or mps")
        return torch.device(want)

    def resolve_dtype(self, device: torch.device, native: bool = False) -> torch.dtype:
        """The compute dtype for device (float32 with the native kernels: their activations
        are float32, and torch's bfloat16 matmuls are slow on CPUs without AVX512-BF16)."""
        if self.dtype == "auto" and native:
            return torch.float32
        if self.dtype == "auto":
            return torch.float16 if device.type == "mps" else torch.bfloat16
        if self.dtype not in _DTYPES:
            raise EngineError(f"dtype {self.dtype!r}: use auto, float32, bfloat16 or float16")
        return _DTYPES[self.dtype]


class TorchRunner:
    """Runs ForwardBatches through a Transformer whose KV lives in a block-addressed KVStore."""

    def __init__(
        self,
        src: ModelSource,
        model: Transformer,
        device: torch.device,
        dtype: torch.dtype,
        kv_dtype: torch.dtype | None = None,
        native: NativeModel | None = None,
    ) -> None:
        cfg = src.config
        self.src, self.model, self.cfg, self.device, self.dtype = src, model, cfg, device, dtype
        self.kv_dtype = kv_dtype or dtype
        self.native = native  # the one-call decode step (CPU, GGUF, native kernels)
        self.kernels: Kernels | None = None  # the native kernels, if this model uses them
        self.native_linears: list[Any] = []  # their layer linears (em_linear descriptions)
        self.governor: ThreadGovernor | None = None  # CPU: the thread count (load() sets it)
        self._tokenizer: Tokenizer | None = None
        self.ropes = build_ropes(src, device)  # rebuilt by init_kv for the cache's size
        self.kv: KVStore | None = None
        self.graphs = DecodeGraphs(self) if cuda_graphs.enabled(self) else None
        self.info = RunnerInfo(
            name="torch",
            device=device.type,
            architecture=cfg.arch,
            vocab_size=cfg.vocab_size,
            context_limit=cfg.context_length,
            kv_bytes_per_token=kv_bytes_per_token(cfg, self.kv_dtype),
            model_digest=src.digest,
            dtype=str(self.kv_dtype).removeprefix("torch."),
        )

    @property
    def tokenizer(self) -> Tokenizer:
        """The model's tokenizer, opened on first use (GGUF: llama.cpp's vocab)."""
        if self._tokenizer is None:
            from ember.models.text.tokenizers.open import open_tokenizer

            self._tokenizer = open_tokenizer(self.src.path)
        return self._tokenizer

    @classmethod
    def load(
        cls,
        path: str | Path,
        options: EngineOptions | TorchOptions | None = None,
        *,
        digest: str = "",
    ) -> TorchRunner:
        """Load a GGUF file or HF safetensors folder; EngineError for unsupported models.

        digest: the model's content digest (app's ModelFiles.digest); it keys the packed-weight
        cache and becomes info.model_digest. Without one the packed cache is not used."""
        opts = _torch_options(options)
        device = opts.resolve_device()
        governor = None
        if device.type == "cpu":  # the decode pool and OpenMP's prefill take torch's count
            governor = ThreadGovernor(opts.threads)
            governor.attach(torch.set_num_threads)
        src = open_model(path, digest)
        progress = getattr(options, "progress", None)  # EngineOptions.progress
        kernels = _native_kernels(opts, device, src, progress)
        dtype = opts.resolve_dtype(device, native=kernels is not None)
        kv_dtype = opts.resolve_kv_dtype(dtype, native=kernels is not None)
        build = BuildOptions(
            dtype=dtype,
            device=device,
            weight_format=opts.weight_format,
            head_format=opts.head_format,
        )
        root = Path(opts.packed_cache_dir) if opts.packed_cache_dir and digest else None
        with torch.inference_mode():
            model = build_model(src, build, root, kernels, progress)
        native = None
        step_reason = native_step_ready(src.config)
        if kernels is not None and step_reason:
            log.info("torch runner: native linears, steps through torch (%s)", step_reason)
        elif kernels is not None:
            from ember.engine.runners.torch.native.kernels import mat_of
            from ember.engine.runners.torch.native.model import NativeModel

            table = src.tensors["token_embd.weight"]
            embed = mat_of(table.raw, table.qtype, table.shape)
            native = NativeModel(kernels.lib, model, embed, keep=[src.keepalive])
        runner = cls(src, model, device, dtype, kv_dtype, native)
        runner.governor, runner.kernels = governor, kernels
        if kernels is not None:
            from ember.engine.runners.torch.native.kernels import layer_descs

            runner.native_linears = layer_descs(model)
        return runner

    def init_kv(self, num_blocks: int, block_size: int) -> None:
        """Allocate the KV pools (dropping any previous ones first). On an accelerator one more
        block is kept as scratch for the padding rows of captured decode steps."""
        self.kv = None
        if self.graphs is not None:
            self.graphs.reset()
        self.ropes = build_ropes(self.src, self.device, num_blocks * block_size)  # LongRoPE
        cfg = self.cfg
        self.kv = KVStore(
            cfg.n_layers,
            num_blocks + (self.device.type != "cpu"),
            block_size,
            cfg.n_kv_heads,
            cfg.head_dim,
            self.kv_dtype,
            self.device,
        )
        if self.native is not None:
            self.native.bind_kv(self.kv)

    def _store(self) -> KVStore:
        if self.kv is None:
            raise EngineError("torch runner: init_kv() must be called before forward()")
        return self.kv

    def _context(self, steps: list[SeqStep], kv: KVStore) -> tuple[StepContext, torch.Tensor]:
        bs, cfg = kv.block_size, self.cfg
        slots: list[int] = []
        spans: list[tuple[int, int]] = []
        rows: list[int] = []
        plans: dict[bool, list[AttnPlan]] = {s: [] for s in self.ropes}
        for st in steps:
            num_new = len(st.token_ids)
            total = st.num_cached + num_new
            if (
                num_new == 0
                or len(st.block_table) * bs < total
                or not 1 <= st.num_logits <= num_new
            ):
                raise EngineError(
                    f"seq {st.seq_id}: bad step ({num_new} tokens, {len(st.block_table)} blocks)"
                )
            start = len(slots)
            slots.extend(st.block_table[i // bs] * bs + i % bs for i in range(st.num_cached, total))
            spans.append((start, start + num_new))
            rows.extend(range(start + num_new - st.num_logits, start + num_new))
            for sliding in plans:
                window = cfg.sliding_window if sliding else None
                plans[sliding].append(
                    make_plan(st.block_table, st.num_cached, num_new, bs, window, self.device)
                )
        positions = torch.tensor(
            [p for st in steps for p in st.positions], dtype=torch.int64, device=self.device
        )
        rope = step_tables(self.ropes, positions)
        slot_t = torch.tensor(slots, dtype=torch.int64, device=self.device)
        ctx = StepContext(slot_t, spans, plans, rope, q_scale=query_temperature(cfg, positions))
        return ctx, torch.tensor(rows, dtype=torch.int64, device=self.device)

    def forward(self, batch: ForwardBatch) -> list[np.ndarray]:
        """Per step, float32 logits (num_logits, vocab)."""
        if self.governor is not None:
            self.governor.tick()
        kv = self._store()
        if not batch.steps:
            return []
        if self.kernels is not None:
            self.kernels.tune(self.native_linears)  # measured choices for this thread count
        if self.native is not None and batch.num_tokens < NATIVE_MAX_TOKENS:
            return self.native.forward(batch.steps, self.ropes)
        if self.device.type != "cpu" and one_token_steps(batch.steps):
            graphed = self.graphs.forward(batch.steps) if self.graphs is not None else None
            return graphed if graphed is not None else decode_batch(self, batch.steps)
        ids = torch.tensor(
            [t for st in batch.steps for t in st.token_ids], dtype=torch.int64, device=self.device
        )
        with torch.inference_mode():
            ctx, rows = self._context(batch.steps, kv)
            logits = self.model(ids, ctx, kv, rows).cpu().numpy()
        out, at = [], 0
        for st in batch.steps:
            out.append(logits[at : at + st.num_logits])
            at += st.num_logits
        return out

    def copy_block(self, src_block: int, dst_block: int, num_tokens: int) -> None:
        """Copy-on-write of a shared partial block."""
        self._store().copy_block(src_block, dst_block, num_tokens)

    def shift_positions(self, seq_id: int, block_ids: list[int], delta: int) -> None:
        """Rotate the keys in block_ids by delta positions (RoPE is additive in angle)."""
        kv = self._store()
        idx = torch.tensor(block_ids, dtype=torch.int64, device=self.device)
        with torch.inference_mode():
            for layer in range(self.cfg.n_layers):
                if not self.cfg.uses_rope(layer):
                    continue  # a NoPE layer's keys carry no position
                cos, sin = self.ropes[self.cfg.is_sliding(layer)].shift_cos_sin(delta)
                keys = kv.read_keys(layer, idx)  # (B, bs, Hkv, D) float32
                rotated = apply_rope(keys.flatten(0, 1), cos, sin).view(keys.shape)
                kv.write_keys(layer, idx, rotated)

    def release(self, seq_id: int) -> None:
        """No per-sequence state: blocks belong to the engine."""

    def read_blocks(self, block_ids: list[int]) -> bytes:
        """KV bytes of these blocks (disk snapshots)."""
        return self._store().read_blocks(block_ids)

    def write_blocks(self, block_ids: list[int], data: bytes) -> None:
        """Restore KV bytes from read_blocks."""
        self._store().write_blocks(block_ids, data)

    def close(self) -> None:
        """Drop the weights and the KV pools."""
        self.kv = None
        self.src.tensors.clear()
        self.src.keepalive = None


def kv_bytes_per_token(cfg: Any, kv_dtype: torch.dtype) -> int:
    """K and V bytes per token over all layers (int8: the codes plus a float32 scale per head)."""
    per_head = cfg.head_dim + 4 if kv_dtype == torch.int8 else cfg.head_dim * kv_dtype.itemsize
    return 2 * cfg.n_layers * cfg.n_kv_heads * per_head


def _native_kernels(
    opts: TorchOptions, device: torch.device, src: ModelSource, progress: Progress | None = None
) -> Kernels | None:
    """The native kernels when this load can use them (kernels=native insists: EngineError);
    progress hears their preparation (a compile on this machine's first run)."""
    if opts.kernels == "torch" or device.type != "cpu":
        if opts.kernels == "native":
            raise EngineError(f"kernels native: only on the CPU (device is {device.type})")
        return None
    reason = ""
    if opts.weight_format != "auto" or opts.head_format != "auto":
        reason = "weight_format/head_format ask for torch's packed forms"
    if not reason:
        reason = native_ready(src)
    kernels = None
    if not reason:
        from ember.engine.runners.torch.native.choice import measured_choice
        from ember.engine.runners.torch.native.kernels import Kernels, native_build

        stage = "preparing the CPU kernels (compiled on the first run)"
        if progress is not None:
            progress(stage, 0, 1)
        build = native_build(_native_dir(opts))
        if progress is not None:
            progress(stage, 1, 1)
        reason = build.reason
        kernels = Kernels(build.lib) if build.lib is not None else None
        if kernels is not None:
            kernels.choice = measured_choice(kernels, build, _native_dir(opts))
    if reason and opts.kernels == "native":
        raise EngineError(f"kernels native: {reason}")
    if reason:
        log.info("torch runner: torch kernels (%s)", reason)
    return kernels


def _native_dir(opts: TorchOptions) -> Path | None:
    """Where the compiled kernels live: beside the packed-weight cache (<cache dir>/native),
    else a temporary folder (None)."""
    return Path(opts.packed_cache_dir).parent / "native" if opts.packed_cache_dir else None


def _torch_options(options: Any) -> TorchOptions:
    if options is None:
        return TorchOptions()
    if isinstance(options, TorchOptions):
        return options
    return TorchOptions(
        device=options.device,
        threads=options.threads,
        packed_cache_dir=options.packed_cache_dir,
        kv_dtype=torch_kv_dtype(options.kv_cache),
    )
