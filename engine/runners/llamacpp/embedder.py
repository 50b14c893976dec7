"""LlamaCppEmbedder: a GGUF embedding model run by llama.cpp with pooled sentence vectors.

The context is created with embeddings on and llama.cpp's pooling taken from the model's
metadata (`{arch}.pooling_type`, read by models/files/pooling.py); a generative model declares
none and is mean-pooled over its last hidden states (what Ollama and llama-server
`--pooling mean` give for a chat model); `rank` (a reranker's score head) is refused before this module sees it (engine/embedding.py). Inputs are packed several to a `llama_decode` (one llama sequence each, every token
an output, as pooling needs), then `llama_get_embeddings_seq` gives one pooled vector per
sequence; the memory is cleared between batches, since no two requests share anything here.
A non-causal model (BERT) must see a whole input in one micro-batch, so n_ubatch = n_batch =
the context limit. This module is separate from the generation runner (runner.py) on purpose:
the two need different contexts and share only lib.py's loaders.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ember.engine.api import AUTO_CTX, EngineOptions
from ember.engine.embedding import EmbedderInfo, EmbeddingInput, Embeddings, InputRejected
from ember.engine.errors import EngineError
from ember.engine.runners.llamacpp.lib import TokenBatch, lib, load_model
from ember.engine.runners.thread_governor import auto_threads

POOLING_NAMES = {1: "mean", 2: "cls", 3: "last"}  # llama_pooling_type values Ember serves
POOLING_IDS = {name: number for number, name in POOLING_NAMES.items()}
MAX_SEQS_PER_BATCH = 16


def _input_limit(ctx: int, trained_ctx: int) -> int:
    """Most tokens one input may have: the asked context, capped by the trained one. `--ctx auto`
    (AUTO_CTX) sizes a chat model's KV cache from free RAM; an embedder has no KV cache to grow,
    and its one micro-batch's attention scratch grows with the square of this limit, so auto
    means the default context (capped by the trained one), not the trained maximum."""
    asked = EngineOptions.ctx if ctx == AUTO_CTX else ctx
    return min(asked, trained_ctx) if trained_ctx > 0 else asked


def _context(model: Any, n_ctx: int, threads: int, pooling: int) -> Any:
    llama = lib()
    params = llama.llama_context_default_params()
    params.n_ctx = n_ctx
    params.n_batch = n_ctx
    params.n_ubatch = n_ctx  # a non-causal input must fit one micro-batch
    params.n_seq_max = MAX_SEQS_PER_BATCH
    params.n_threads = params.n_threads_batch = threads or auto_threads()[0]
    params.embeddings = True
    params.pooling_type = pooling
    params.kv_unified = True  # causal embedders: any sequence may use every cell
    params.no_perf = True
    # as the generation runner and llama-cpp-python: flash attention's CPU kernel rounds
    # differently (vectors moved by ~3e-4 against llama-cpp-python's own on the test model)
    params.flash_attn_type = llama.LLAMA_FLASH_ATTN_TYPE_DISABLED
    ctx = llama.llama_init_from_model(model, params)
    if not ctx:
        raise EngineError(f"llama.cpp could not create an embedding context of {n_ctx} tokens")
    return ctx


class LlamaCppEmbedder:
    """Embedder over llama.cpp: tokenize, batch, decode, read pooled vectors."""

    def __init__(self, model: Any, ctx: Any, info: EmbedderInfo) -> None:
        self._model = model
        self._ctx = ctx
        self._vocab = lib().llama_model_get_vocab(model)
        self._batch = TokenBatch(info.context_limit)
        self._lock = threading.Lock()
        self.info = info

    @classmethod
    def load(
        cls, path: Path | str, options: EngineOptions, *, name: str, pooling: str, trained: bool
    ) -> LlamaCppEmbedder:
        """Load path as an embedding model pooled by pooling (one of POOLING_NAMES' values);
        trained: whether the file declares that pooling (False: a generative model)."""
        llama = lib()
        path = Path(path)
        offload = options.device != "cpu" and bool(llama.llama_supports_gpu_offload())
        model = load_model(path, -1 if offload else 0)
        ctx = None
        try:
            limit = _input_limit(options.ctx, int(llama.llama_model_n_ctx_train(model)))
            ctx = _context(model, limit, options.threads, POOLING_IDS[pooling])
            arch = _meta(model, "general.architecture") or "unknown"
            info = EmbedderInfo(
                model=name,
                runner="llama.cpp",
                device="cpu" if not offload else "gpu",
                architecture=arch,
                dimensions=int(llama.llama_model_n_embd(model)),
                pooling=pooling,
                trained=trained,
                context_limit=limit,
                vocab_size=int(llama.llama_vocab_n_tokens(llama.llama_model_get_vocab(model))),
            )
            return cls(model, ctx, info)
        except BaseException:
            if ctx is not None:
                llama.llama_free(ctx)
            llama.llama_model_free(model)
            raise

    def tokenize(self, text: str) -> list[int]:
        """Ids of text with the model's own special tokens (BERT: [CLS] ... [SEP])."""
        llama = lib()
        data = text.encode("utf-8")
        capacity = len(data) + 8
        while True:
            buf = (llama.llama_token * capacity)()
            count = llama.llama_tokenize(self._vocab, data, len(data), buf, capacity, True, False)
            if count >= 0:
                return list(buf[:count])
            capacity = -count

    def embed(
        self, inputs: Sequence[EmbeddingInput], *, normalize: bool = True, truncate: bool = False
    ) -> Embeddings:
        """One vector per input, in order (float32, L2-normalized when normalize)."""
        with self._lock:
            if self._ctx is None:
                raise EngineError(f"embedding model {self.info.model} is closed")
            ids = [self._ids(i, item, truncate) for i, item in enumerate(inputs)]
            out = np.empty((len(ids), self.info.dimensions), dtype=np.float32)
            start = 0
            while start < len(ids):
                end = self._pack(ids, start)
                out[start:end] = self._run(ids[start:end])
                start = end
        if normalize:
            norms = np.linalg.norm(out, axis=1, keepdims=True)
            out /= np.where(norms > 0, norms, np.float32(1.0))
        return Embeddings(out, tuple(len(x) for x in ids))

    def _ids(self, index: int, item: EmbeddingInput, truncate: bool) -> list[int]:
        ids = self.tokenize(item) if isinstance(item, str) else [int(t) for t in item]
        if not ids:
            raise InputRejected(index, "empty")
        vocab = self.info.vocab_size
        if any(not 0 <= t < vocab for t in ids):
            raise InputRejected(index, f"token ids must be in [0, {vocab})")
        limit = self.info.context_limit
        if len(ids) > limit:
            if not truncate:
                raise InputRejected(
                    index, f"{len(ids)} tokens exceed the model's context of {limit}"
                )
            ids = ids[:limit]
        return ids

    def _pack(self, ids: list[list[int]], start: int) -> int:
        """End of the run of inputs from start that fits one decode."""
        end, total = start, 0
        while end < len(ids) and end - start < MAX_SEQS_PER_BATCH:
            if total + len(ids[end]) > self._batch.capacity and end > start:
                break
            total += len(ids[end])
            end += 1
        return end

    def _run(self, group: list[list[int]]) -> np.ndarray:
        """Pooled vectors (len(group), dimensions) of inputs decoded together."""
        llama = lib()
        memory = llama.llama_get_memory(self._ctx)
        if memory:  # encoder-only models keep no memory
            llama.llama_memory_clear(memory, True)
        self._batch.clear()
        for seq, tokens in enumerate(group):
            self._batch.add(seq, tokens, list(range(len(tokens))), len(tokens))
        self._batch.batch.n_tokens = self._batch.size
        code = llama.llama_decode(self._ctx, self._batch.batch)
        if code != 0:
            raise EngineError(f"llama_decode failed for embeddings ({code})")
        rows = np.empty((len(group), self.info.dimensions), dtype=np.float32)
        for seq in range(len(group)):
            ptr = llama.llama_get_embeddings_seq(self._ctx, seq)
            if not ptr:
                raise EngineError("llama.cpp returned no pooled embedding")
            rows[seq] = np.ctypeslib.as_array(ptr, shape=(self.info.dimensions,))
        return rows

    def close(self) -> None:
        with self._lock:
            llama = lib()
            if self._ctx is not None:
                llama.llama_free(self._ctx)
                self._ctx = None
            if self._model is not None:
                llama.llama_model_free(self._model)
                self._model = None


def _meta(model: Any, key: str) -> str | None:
    buf = ctypes.create_string_buffer(256)
    count = lib().llama_model_meta_val_str(model, key.encode(), buf, len(buf))
    return buf.value.decode("utf-8", "replace") if count >= 0 else None
