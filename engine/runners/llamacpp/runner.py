"""LlamaCppRunner: a GGUF model run by llama.cpp (llama-cpp-python's low-level API) as a Runner.

The engine does the rest (scheduling, sampling, stop strings, detokenizing), so a request gives
the same events here as on the torch runner. This file turns a ForwardBatch into one or more
batched `llama_decode` calls and hands back float32 logits for each requested row; BlockMap
(blocks.py) maps the engine's block tables onto llama.cpp sequence memory.
"""

from __future__ import annotations

import ctypes
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ember.engine.errors import EngineError
from ember.engine.runners.base import ForwardBatch, RunnerInfo
from ember.engine.runners.cpu_offer import check_threads
from ember.engine.runners.llamacpp import snapshot
from ember.engine.runners.llamacpp.blocks import BlockMap, PlannedStep
from ember.engine.runners.llamacpp.lib import (
    KV_BYTES_PER_ELEMENT,
    KV_GGML_TYPES,
    ContextConfig,
    LlamaMemory,
    TokenBatch,
    decode,
    lib,
    load_model,
    new_context,
)
from ember.engine.runners.thread_governor import ThreadGovernor

if TYPE_CHECKING:
    from ember.engine.api import EngineOptions
    from ember.models.text.tokenizers.base import Tokenizer

KV_SLACK_TOKENS = 256  # cells beyond the engine's blocks, for transient copies
INITIAL_KV_TOKENS = 512
LLAMA_KV_TYPES = {"f16": "f16", "q8": "q8_0", "q4": "q4_0"}  # --kv-cache -> llama.cpp's K/V type


@dataclass(frozen=True)
class LlamaCppConfig:
    """How the runner drives llama.cpp."""

    threads: int = 0  # 0 = auto: the cores free now, re-measured while it runs (ThreadGovernor)
    batch_tokens: int = 512  # n_batch: the most tokens one llama_decode takes
    ubatch_tokens: int = 512  # n_ubatch: tokens per compute graph
    gpu_layers: int = 0  # layers offloaded on a CUDA/Metal build (-1 = all)
    max_sequences: int = 64  # llama seq ids: running sequences + keepers of cached blocks
    flash_attn: bool = False
    use_mmap: bool = True
    use_mlock: bool = False
    kv_type: str = "f16"  # f16 | q8_0 | q4_0: the cache's element type (quantized: flash attn)

    def __post_init__(self) -> None:
        if self.kv_type not in KV_GGML_TYPES:
            raise EngineError(f"kv_type={self.kv_type!r}: use one of {', '.join(KV_GGML_TYPES)}")
        if not 2 <= self.max_sequences <= 256:
            raise EngineError(f"max_sequences={self.max_sequences}: must be in [2, 256]")
        if self.batch_tokens < 1 or self.ubatch_tokens < 1:
            raise EngineError("llama.cpp batch sizes must be >= 1")
        check_threads(self.threads)

    @classmethod
    def from_options(cls, options: EngineOptions) -> LlamaCppConfig:
        """Map `ember run` options: threads, GPU offload unless --device cpu, --kv-cache."""
        offload = options.device != "cpu" and bool(lib().llama_supports_gpu_offload())
        return cls(
            threads=options.threads,
            gpu_layers=-1 if offload else 0,
            max_sequences=min(256, max(16, 4 * options.max_batch)),
            kv_type=LLAMA_KV_TYPES[options.kv_cache],
        )


def _gpu_backend() -> str:
    """'cuda', 'metal' or 'vulkan' as llama.cpp's build reports it, else 'gpu'."""
    info = lib().llama_print_system_info().decode("utf-8", "replace").lower()
    return next((name for name in ("cuda", "metal", "vulkan") if name in info), "gpu")


def _meta(model: Any, key: str) -> str | None:
    buf = ctypes.create_string_buffer(256)
    count = lib().llama_model_meta_val_str(model, key.encode(), buf, len(buf))
    return buf.value.decode("utf-8", "replace") if count >= 0 else None


def _model_info(model: Any, device: str, digest: str, kv_type: str) -> RunnerInfo:
    llama = lib()
    arch = _meta(model, "general.architecture") or "unknown"
    n_head = max(1, llama.llama_model_n_head(model))
    head_dim = llama.llama_model_n_embd(model) // n_head
    key_dim = int(_meta(model, f"{arch}.attention.key_length") or head_dim)
    value_dim = int(_meta(model, f"{arch}.attention.value_length") or head_dim)
    kv_heads = llama.llama_model_n_head_kv(model)
    return RunnerInfo(
        name="llama.cpp",
        device=device,
        architecture=arch,
        vocab_size=llama.llama_vocab_n_tokens(llama.llama_model_get_vocab(model)),
        context_limit=llama.llama_model_n_ctx_train(model),
        kv_bytes_per_token=int(
            llama.llama_model_n_layer(model)
            * kv_heads
            * (key_dim + value_dim)
            * KV_BYTES_PER_ELEMENT[kv_type]
        ),
        model_digest=digest,
        dtype=kv_type,
    )


class LlamaCppRunner:
    """Runner over llama.cpp: batched llama_decode, logits rows, KV blocks as sequence memory."""

    def __init__(
        self,
        path: Path,
        model: Any,
        config: LlamaCppConfig,
        tokenizer: Tokenizer,
        digest: str = "",
    ) -> None:
        self.path = path
        self.config = config
        self.tokenizer = tokenizer
        self._model = model
        # llama.cpp's threads wait for each other every step: as many as cores are free
        self.governor = ThreadGovernor(config.threads)
        device = "cpu" if config.gpu_layers == 0 else _gpu_backend()
        self.info = _model_info(model, device, digest, config.kv_type)
        self._ctx: Any = None
        self._blocks: BlockMap | None = None
        self._batch = TokenBatch(config.batch_tokens)
        # A small cache until the engine sizes the pool (it also tells whether K-shift works).
        self.init_kv(INITIAL_KV_TOKENS // 16, 16)

    @classmethod
    def load(
        cls,
        path: Path | str,
        options: EngineOptions | None = None,
        *,
        digest: str = "",
        **overrides: Any,
    ) -> LlamaCppRunner:
        """Load a GGUF file; options map threads/device, overrides set LlamaCppConfig fields;
        digest (app's ModelFiles.digest) becomes info.model_digest (it keys disk snapshots)."""
        from ember.models.files.gguf import open_gguf
        from ember.models.text.tokenizers.open import open_tokenizer

        path = Path(path)
        open_gguf(path)  # the bounded checks `ember show` makes, before llama.cpp parses it
        config = LlamaCppConfig.from_options(options) if options else LlamaCppConfig()
        config = dataclasses.replace(config, **overrides)
        model = load_model(path, config.gpu_layers, config.use_mmap, config.use_mlock)
        try:
            return cls(path, model, config, open_tokenizer(path), digest)
        except BaseException:
            lib().llama_model_free(model)
            raise

    @property
    def block_map(self) -> BlockMap:
        if self._blocks is None:
            raise EngineError("llama.cpp runner is closed")
        return self._blocks

    @property
    def num_ctx_tokens(self) -> int:
        """KV cells of the current context."""
        return int(lib().llama_n_ctx(self._ctx))

    def init_kv(self, num_blocks: int, block_size: int) -> None:
        """A fresh context whose unified KV cache holds num_blocks * block_size tokens."""
        self._free_context()
        config = ContextConfig(
            n_ctx=num_blocks * block_size + KV_SLACK_TOKENS,
            n_batch=self.config.batch_tokens,
            n_ubatch=self.config.ubatch_tokens,
            n_seq_max=self.config.max_sequences,
            n_threads=self.governor.threads,
            flash_attn=self.config.flash_attn,
            kv_type=self.config.kv_type,
        )
        self._ctx = new_context(self._model, config)
        self.governor.attach(self._set_threads)
        memory = LlamaMemory(self._ctx)
        self._blocks = BlockMap(memory, block_size, self.config.max_sequences)
        can_shift = bool(lib().llama_memory_can_shift(lib().llama_get_memory(self._ctx)))
        self.info = dataclasses.replace(self.info, supports_shift=can_shift)

    def _set_threads(self, threads: int) -> None:
        if self._ctx is not None:
            lib().llama_set_n_threads(self._ctx, threads, threads)

    def forward(self, batch: ForwardBatch) -> list[np.ndarray]:
        """Per step, float32 logits (num_logits, vocab_size) of its last num_logits tokens.

        batch.borrow_logits and one llama_decode (every decode step): read-only views of
        llama.cpp's own logits buffer, valid until this runner's next call. Copying a
        262k-vocabulary row cost more per token than the rest of the engine's step."""
        self.governor.tick()
        planned = [self.block_map.plan(step) for step in batch.steps]
        if batch.borrow_logits and self._fits_one_decode(planned):
            return self._lend(planned)
        vocab = self.info.vocab_size
        outputs = [np.empty((p.num_logits, vocab), dtype=np.float32) for p in planned]
        rows: list[tuple[int, int]] = []  # (step, row) of each logits row in the llama batch
        self._batch.clear()
        for index, step in enumerate(planned):
            self._add_step(index, step, outputs, rows)
        self._flush(outputs, rows)
        return outputs

    def _fits_one_decode(self, planned: list[PlannedStep]) -> bool:
        tokens = sum(len(step.token_ids) for step in planned)
        return tokens <= self._batch.capacity and all(
            0 < step.num_logits <= len(step.token_ids) for step in planned
        )

    def _lend(self, planned: list[PlannedStep]) -> list[np.ndarray]:
        """One llama_decode; each step's rows as a read-only view of the logits it wrote."""
        batch = self._batch
        batch.clear()
        for step in planned:
            batch.add(step.llama_seq, step.token_ids, step.positions, step.num_logits)
        logits = decode(self._ctx, batch, self.info.vocab_size)
        outputs, row = [], 0
        for step in planned:
            outputs.append(logits[row : row + step.num_logits])
            row += step.num_logits
        return outputs

    def _add_step(
        self, index: int, step: PlannedStep, outputs: list[np.ndarray], rows: list[tuple[int, int]]
    ) -> None:
        count = len(step.token_ids)
        first_logit = count - step.num_logits
        start = 0
        while start < count:
            room = self._batch.capacity - self._batch.size
            if room == 0:
                self._flush(outputs, rows)
                continue
            end = min(count, start + room)
            lo = max(start, first_logit)
            self._batch.add(
                step.llama_seq,
                step.token_ids[start:end],
                step.positions[start:end],
                max(0, end - lo),
            )
            rows += [(index, r - first_logit) for r in range(lo, end)]
            start = end

    def _flush(self, outputs: list[np.ndarray], rows: list[tuple[int, int]]) -> None:
        if not self._batch.size:
            return
        logits = decode(self._ctx, self._batch, self.info.vocab_size)
        for j, (index, row) in enumerate(rows):
            outputs[index][row] = logits[j]
        rows.clear()
        self._batch.clear()

    def copy_block(self, src_block: int, dst_block: int, num_tokens: int) -> None:
        """Copy the first num_tokens KV cells of src_block into dst_block (a physical copy)."""
        self.block_map.copy(src_block, dst_block, num_tokens)

    def shift_positions(self, seq_id: int, block_ids: list[int], delta: int) -> None:
        """Re-base the keys of block_ids by delta positions (llama.cpp's K-shift)."""
        self.block_map.shift(seq_id, block_ids, delta)

    def release(self, seq_id: int) -> None:
        """The sequence ended; its blocks stay cached under a keeper sequence."""
        self.block_map.release(seq_id)

    def read_blocks(self, block_ids: list[int]) -> bytes:
        """Block-major records: each block's position, tokens and llama.cpp state bytes."""
        records = []
        for block_id in block_ids:
            loc, state = self.block_map.export_block(block_id)
            records.append(snapshot.BlockRecord(loc.pos_start, tuple(loc.token_ids), state))
        return snapshot.pack(records, self.block_map.block_size)

    def write_blocks(self, block_ids: list[int], data: bytes) -> None:
        """Load records from read_blocks (any run of them) into these blocks."""
        block_map = self.block_map
        records = snapshot.unpack(data, len(block_ids), block_map.block_size)
        for block_id, record in zip(block_ids, records, strict=True):
            block_map.import_block(block_id, record.pos_start, list(record.token_ids), record.state)

    def _free_context(self) -> None:
        if self._ctx is not None:
            lib().llama_free(self._ctx)
            self._ctx = None
            self._blocks = None

    def close(self) -> None:
        """Free the context and the model."""
        self._free_context()
        if self._model is not None:
            lib().llama_model_free(self._model)
            self._model = None
