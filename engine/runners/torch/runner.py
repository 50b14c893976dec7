"""TorchRunner: our transformer over a paged KV store, behind the engine's Runner protocol."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ember.engine.errors import EngineError
from ember.engine.runners.base import ForwardBatch, RunnerInfo, SeqStep
from ember.engine.runners.torch.build import BuildOptions, build_model
from ember.engine.runners.torch.kv_store import KVStore
from ember.engine.runners.torch.layers.attention import AttnPlan, make_plan
from ember.engine.runners.torch.layers.rope import Rope, apply_rope, signed_sin
from ember.engine.runners.torch.loader import ModelSource, open_model
from ember.engine.runners.torch.model import StepContext, Transformer

if TYPE_CHECKING:
    from ember.engine.api import EngineOptions
    from ember.models.text.tokenizers.base import Tokenizer

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
    threads: int = 0  # 0 = leave torch's default
    packed_cache_dir: str = ""  # map converted weights from here (packed_cache.py); "" = off

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

    def resolve_dtype(self, device: torch.device) -> torch.dtype:
        """The compute dtype for device."""
        if self.dtype == "auto":
            return torch.float16 if device.type == "mps" else torch.bfloat16
        if self.dtype not in _DTYPES:
            raise EngineError(f"dtype {self.dtype!r}: use auto, float32, bfloat16 or float16")
        return _DTYPES[self.dtype]


class TorchRunner:
    """Runs ForwardBatches through a Transformer whose KV lives in a block-addressed KVStore."""

    def __init__(
        self, src: ModelSource, model: Transformer, device: torch.device, dtype: torch.dtype
    ) -> None:
        cfg = src.config
        self.src, self.model, self.cfg, self.device, self.dtype = src, model, cfg, device, dtype
        self._tokenizer: Tokenizer | None = None
        freq_factors = src.tensors.get("rope_freqs.weight")
        factors = freq_factors.to_float() if freq_factors is not None else None
        self.ropes = {
            sliding: Rope(cfg.layer_rope(_first_layer(cfg, sliding)), cfg.head_dim, device, factors)
            for sliding in {cfg.is_sliding(i) for i in range(cfg.n_layers)}
        }
        self.kv: KVStore | None = None
        self.info = RunnerInfo(
            name="torch",
            device=device.type,
            architecture=cfg.arch,
            vocab_size=cfg.vocab_size,
            context_limit=cfg.context_length,
            kv_bytes_per_token=2 * cfg.n_layers * cfg.n_kv_heads * cfg.head_dim * dtype.itemsize,
            model_digest=src.digest,
            dtype=str(dtype).removeprefix("torch."),
        )

    @property
    def tokenizer(self) -> Tokenizer:
        """The model's tokenizer, opened on first use (GGUF: llama.cpp's vocab)."""
        if self._tokenizer is None:
            from ember.models.text.tokenizers.base import open_tokenizer

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
        if opts.threads > 0:
            torch.set_num_threads(opts.threads)
        device = opts.resolve_device()
        dtype = opts.resolve_dtype(device)
        src = open_model(path, digest)
        build = BuildOptions(
            dtype=dtype,
            device=device,
            weight_format=opts.weight_format,
            head_format=opts.head_format,
        )
        root = Path(opts.packed_cache_dir) if opts.packed_cache_dir and digest else None
        with torch.inference_mode():
            model = build_model(src, build, root)
        return cls(src, model, device, dtype)

    def init_kv(self, num_blocks: int, block_size: int) -> None:
        """Allocate the KV pools (dropping any previous ones first)."""
        self.kv = None
        cfg = self.cfg
        self.kv = KVStore(
            cfg.n_layers,
            num_blocks,
            block_size,
            cfg.n_kv_heads,
            cfg.head_dim,
            self.dtype,
            self.device,
        )

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
        rope = {s: _signed(r.cos_sin(positions)) for s, r in self.ropes.items()}
        slot_t = torch.tensor(slots, dtype=torch.int64, device=self.device)
        return StepContext(slot_t, spans, plans, rope), torch.tensor(
            rows, dtype=torch.int64, device=self.device
        )

    def forward(self, batch: ForwardBatch) -> list[np.ndarray]:
        """Per step, float32 logits (num_logits, vocab)."""
        kv = self._store()
        if not batch.steps:
            return []
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
                cos, sin = self.ropes[self.cfg.is_sliding(layer)].shift_cos_sin(delta)
                keys = kv.k[layer].index_select(0, idx)  # (B, bs, Hkv, D)
                shape = keys.shape
                rotated = apply_rope(keys.float().flatten(0, 1), cos, sin).view(shape)
                kv.k[layer].index_copy_(0, idx, rotated.to(kv.dtype))

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


def _signed(cos_sin: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    return cos_sin[0], signed_sin(cos_sin[1])


def _first_layer(cfg: Any, sliding: bool) -> int:
    return next(i for i in range(cfg.n_layers) if cfg.is_sliding(i) == sliding)


def _torch_options(options: Any) -> TorchOptions:
    if options is None:
        return TorchOptions()
    if isinstance(options, TorchOptions):
        return options
    return TorchOptions(
        device=options.device, threads=options.threads, packed_cache_dir=options.packed_cache_dir
    )
