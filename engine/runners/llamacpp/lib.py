"""Thin helpers over llama-cpp-python's low-level API: model and context, batches, memory ops.

Everything here calls `llama_cpp.llama_*` functions directly (no `llama_cpp.Llama`), so the
runner controls batching, positions, sequence ids and which rows produce logits.
"""

from __future__ import annotations

import ctypes
import logging
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from ember.engine.errors import EngineError
from ember.engine.runners.thread_governor import auto_threads


@cache
def lib() -> ModuleType:
    """The llama_cpp module, imported once with its log output limited to errors."""
    try:
        import llama_cpp
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise EngineError(f"llama-cpp-python is not installed ({exc})") from exc
    logging.getLogger("llama-cpp-python").setLevel(logging.ERROR)
    llama_cpp.llama_backend_init()
    return llama_cpp


KV_GGML_TYPES = {"f16": 1, "q8_0": 8, "q4_0": 2}  # GGML type ids of the supported cache types
KV_BYTES_PER_ELEMENT = {"f16": 2.0, "q8_0": 34 / 32, "q4_0": 18 / 32}


@dataclass(frozen=True)
class ContextConfig:
    """llama_context_params the runner sets (the rest keep llama.cpp's defaults)."""

    n_ctx: int
    n_batch: int = 512
    n_ubatch: int = 512
    n_seq_max: int = 64
    n_threads: int = 0  # 0 = auto (ThreadGovernor: the cores free now)
    flash_attn: bool = False
    kv_type: str = "f16"  # f16 | q8_0 | q4_0 (K and V cache element type)


def quiet_llama_logs() -> None:
    """Keep llama.cpp's log chatter off stderr (EMBER_LLAMA_VERBOSE=1 shows it).

    Ember reports load and decode failures itself (EngineError naming the file). All levels are
    muted: llama-cpp-python's level table predates ggml's current enum, so its "error" filter
    lets warnings through.
    """
    import logging
    import os

    from llama_cpp import _logger  # the log callback llama-cpp-python installs at import

    verbose = os.environ.get("EMBER_LLAMA_VERBOSE") == "1"
    _logger.logger.setLevel(logging.DEBUG if verbose else logging.CRITICAL + 1)


def load_mode(llama: ModuleType, use_mmap: bool, use_mlock: bool) -> int:
    """llama.cpp's load mode for Ember's two switches (llama-cpp-python >= 0.3.3x replaced the
    use_mmap / use_mlock booleans with one `load_mode` enum)."""
    if use_mmap:
        return int(llama.LLAMA_LOAD_MODE_MMAP_MLOCK if use_mlock else llama.LLAMA_LOAD_MODE_MMAP)
    return int(llama.LLAMA_LOAD_MODE_MLOCK if use_mlock else llama.LLAMA_LOAD_MODE_NONE)


def amx_build(system_info: str) -> bool:
    """Whether this llama.cpp build carries its AMX matmul (`AMX_INT8 = 1` in its system info).

    That path runs through llama.cpp's extra (repacked) weight buffers and dies with SIGILL on
    CPUs and VMs that report AMX (a `tilezero` in ggml_backend_amx_mul_mat: llama.cpp issues
    #28756, #28328; reproduced with llama-cpp-python 0.3.36 built with -march=native on an
    Intel Xeon with amx_int8, where a plain AMX program runs), taking Ember's process with it.
    """
    return "AMX_INT8 = 1" in system_info


def model_params(llama: ModuleType, gpu_layers: int, use_mmap: bool, use_mlock: bool) -> Any:
    """llama_model_params with Ember's options, written to the fields this llama-cpp-python
    really has: a ctypes Structure takes an unknown attribute silently, so `params.use_mmap`
    on a build that reads `load_mode` would be a switch that does nothing."""
    params = llama.llama_model_default_params()
    fields = {name for name, *_ in type(params)._fields_}
    params.n_gpu_layers = gpu_layers
    if "load_mode" in fields:
        params.load_mode = load_mode(llama, use_mmap, use_mlock)
    else:
        params.use_mmap = use_mmap
        params.use_mlock = use_mlock
    if "use_extra_bufts" in fields and amx_build(llama.llama_print_system_info().decode()):
        params.use_extra_bufts = False  # no AMX (or repacked) weight buffers: see amx_build
        logging.getLogger(__name__).info("llama.cpp: AMX build, extra weight buffers off")
    return params


def load_model(path: Path, gpu_layers: int, use_mmap: bool = True, use_mlock: bool = False) -> Any:
    """llama_model_load_from_file with Ember's options; EngineError naming the file on failure."""
    llama = lib()
    if not path.is_file():
        raise EngineError(f"{path}: no such GGUF file")
    quiet_llama_logs()
    params = model_params(llama, gpu_layers, use_mmap, use_mlock)
    model = llama.llama_model_load_from_file(str(path).encode(), params)
    if not model:
        from ember.models.text.tokenizers.pre_split import load_failure_reason

        reason = load_failure_reason(path) or "llama.cpp could not load this model"
        raise EngineError(f"{path}: {reason}")
    return model


def new_context(model: Any, config: ContextConfig) -> Any:
    """A context with one unified KV cache shared by all sequences (cheap seq_cp)."""
    llama = lib()
    params = llama.llama_context_default_params()
    threads = config.n_threads or auto_threads()[0]
    params.n_ctx = config.n_ctx
    params.n_batch = config.n_batch
    params.n_ubatch = min(config.n_ubatch, config.n_batch)
    params.n_seq_max = config.n_seq_max
    params.n_threads = threads
    params.n_threads_batch = threads
    params.kv_unified = True  # one cell pool: sharing a prefix copies no data
    params.swa_full = True  # sliding-window layers keep every cell, so prefixes can be shared
    params.no_perf = True
    params.type_k = params.type_v = KV_GGML_TYPES[config.kv_type]
    # llama.cpp reads a quantized V cache only inside its flash-attention kernel
    flash = config.flash_attn or config.kv_type != "f16"
    params.flash_attn_type = (
        llama.LLAMA_FLASH_ATTN_TYPE_ENABLED if flash else llama.LLAMA_FLASH_ATTN_TYPE_DISABLED
    )
    ctx = llama.llama_init_from_model(model, params)
    if not ctx:
        raise EngineError(f"llama.cpp could not create a context of {config.n_ctx} tokens")
    return ctx


class LlamaMemory:
    """SeqMemory over a context's llama_memory_* and llama_state_seq_* functions."""

    def __init__(self, ctx: Any) -> None:
        self._llama = lib()
        self._ctx = ctx
        self._mem = self._llama.llama_get_memory(ctx)

    def seq_rm(self, seq: int, p0: int, p1: int) -> None:
        if not self._llama.llama_memory_seq_rm(self._mem, seq, p0, p1):
            raise EngineError(f"llama.cpp refused to remove positions [{p0}, {p1}) of seq {seq}")

    def seq_cp(self, src: int, dst: int, p0: int, p1: int) -> None:
        self._llama.llama_memory_seq_cp(self._mem, src, dst, p0, p1)

    def seq_add(self, seq: int, p0: int, p1: int, delta: int) -> None:
        self._llama.llama_memory_seq_add(self._mem, seq, p0, p1, delta)

    def pos_range(self, seq: int) -> tuple[int, int]:
        """(lowest, highest) position held by seq; (-1, -1) when empty."""
        mem = self._mem
        return (
            self._llama.llama_memory_seq_pos_min(mem, seq),
            self._llama.llama_memory_seq_pos_max(mem, seq),
        )

    def state_get(self, seq: int) -> bytes:
        size = self._llama.llama_state_seq_get_size(self._ctx, seq)
        buf = (ctypes.c_uint8 * size)()
        written = self._llama.llama_state_seq_get_data(self._ctx, buf, size, seq)
        return bytes(buf)[:written]

    def state_set(self, seq: int, data: bytes) -> None:
        buf = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        if not self._llama.llama_state_seq_set_data(self._ctx, buf, len(data), seq):
            raise EngineError("llama.cpp rejected the KV snapshot (wrong model or no free cells)")


class TokenBatch:
    """A llama_batch over numpy arrays we own: filled by slices, not a Python loop per field."""

    def __init__(self, capacity: int) -> None:
        llama = lib()
        self.capacity = capacity
        self.token = np.zeros(capacity, dtype=np.int32)
        self.pos = np.zeros(capacity, dtype=np.int32)
        self.n_seq_id = np.ones(capacity, dtype=np.int32)
        self.seq = np.zeros(capacity, dtype=np.int32)  # one seq id per token
        self.seq_ptr = (self.seq.ctypes.data + 4 * np.arange(capacity)).astype(np.uintp)
        self.logits = np.zeros(capacity, dtype=np.int8)
        self.num_logits = 0  # rows of logits the batch asks for (the 1s in self.logits)
        i32p = ctypes.POINTER(ctypes.c_int32)
        self.batch = llama.llama_batch(
            n_tokens=0,
            token=self.token.ctypes.data_as(i32p),
            embd=None,
            pos=self.pos.ctypes.data_as(i32p),
            n_seq_id=self.n_seq_id.ctypes.data_as(i32p),
            seq_id=ctypes.cast(self.seq_ptr.ctypes.data, ctypes.POINTER(i32p)),
            logits=self.logits.ctypes.data_as(ctypes.POINTER(ctypes.c_int8)),
        )
        self.size = 0

    def clear(self) -> None:
        self.size = self.num_logits = 0

    def add(self, seq: int, token_ids: list[int], positions: list[int], num_logits: int) -> None:
        """Append one sequence's tokens; the last num_logits of them produce logits."""
        start, end = self.size, self.size + len(token_ids)
        self.token[start:end] = token_ids
        self.pos[start:end] = positions
        self.seq[start:end] = seq
        self.logits[start:end] = 0
        if num_logits:
            self.logits[end - num_logits : end] = 1
        self.size = end
        self.num_logits += min(num_logits, len(token_ids))


_VIEWS: dict[tuple[int, int, int], np.ndarray] = {}  # (address, rows, vocab) -> read-only view


def decode(ctx: Any, batch: TokenBatch, n_vocab: int) -> np.ndarray:
    """llama_decode the batch; float32 logits (num_output_rows, n_vocab), rows in batch order:
    a read-only view of the context's logits buffer, valid until its next decode."""
    llama = lib()
    batch.batch.n_tokens = batch.size
    code = llama.llama_decode(ctx, batch.batch)
    if code != 0:
        reason = {1: "no free KV cells for the batch", 2: "aborted", -1: "invalid batch"}
        raise EngineError(f"llama_decode failed ({code}: {reason.get(code, 'fatal error')})")
    num_rows = batch.num_logits
    if not num_rows:
        return np.zeros((0, n_vocab), dtype=np.float32)
    ptr = llama.llama_get_logits(ctx)
    # one view per buffer address and shape: the buffer stays put from one decode to the next,
    # and a view is only handed out for the address llama.cpp reports now
    key = (ctypes.cast(ptr, ctypes.c_void_p).value or 0, num_rows, n_vocab)
    view = _VIEWS.get(key)
    if view is None:
        if len(_VIEWS) >= 256:
            _VIEWS.clear()
        view = _VIEWS[key] = np.ctypeslib.as_array(ptr, shape=(num_rows, n_vocab))
        view.flags.writeable = False
    return view
