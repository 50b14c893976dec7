"""LlamaCppTokenizer: a GGUF file's vocabulary through llama.cpp, so ids equal llama.cpp's own."""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path
from typing import Any

from ember.models.errors import ModelFileError
from ember.text import clean

_STDERR_LOCK = threading.Lock()  # two overlapping redirects could leave fd 2 on /dev/null


@contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Silence llama.cpp's C-level loader chatter (it would garble a terminal UI)."""
    with _STDERR_LOCK:
        try:
            saved = os.dup(2)
        except OSError:
            yield
            return
        try:
            with open(os.devnull, "wb") as devnull:
                os.dup2(devnull.fileno(), 2)
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def _load_vocab_only(path: Path) -> Any:
    """A llama.cpp model handle holding only the vocabulary (the weights are never read)."""
    import llama_cpp

    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    with _quiet_stderr():
        model = llama_cpp.llama_model_load_from_file(str(path).encode(), params)
    if not model:
        from ember.models.text.tokenizers.pre_split import load_failure_reason

        reason = load_failure_reason(path) or "llama.cpp cannot load the vocabulary of this file"
        raise ModelFileError(f"{path}: {reason}")
    return model


class LlamaCppTokenizer:
    """Tokenizer of a .gguf file through llama.cpp's vocabulary code (vocab-only load)."""

    def __init__(self, path: Path | str) -> None:
        import llama_cpp

        self.path = Path(path)
        if not self.path.is_file():
            raise ModelFileError(f"{self.path}: no such GGUF file")
        self._lib = llama_cpp
        self._model = _load_vocab_only(self.path)
        self._vocab = llama_cpp.llama_model_get_vocab(self._model)
        self._lock = threading.Lock()  # the ctypes buffer below is reused
        self.vocab_size = int(llama_cpp.llama_vocab_n_tokens(self._vocab))
        self.bos_id = self._valid(llama_cpp.llama_vocab_bos(self._vocab))
        self.eos_id = self._valid(llama_cpp.llama_vocab_eos(self._vocab))
        self.add_bos = bool(llama_cpp.llama_vocab_get_add_bos(self._vocab))
        # llama.cpp's end-of-generation set: EOS, EOT and the turn-end spellings it recognises.
        self.eot_ids = frozenset(
            i for i in range(self.vocab_size) if llama_cpp.llama_vocab_is_eog(self._vocab, i)
        )
        self._piece_buf = ctypes.create_string_buffer(256)
        self._bytes_cache: dict[int, bytes] = {}

    def close(self) -> None:
        """Free llama.cpp's vocabulary (also done when the object is collected)."""
        model, self._model = getattr(self, "_model", None), None
        if model is not None:
            self._lib.llama_model_free(model)

    def __del__(self) -> None:
        self.close()

    @cached_property
    def special_ids(self) -> frozenset[int]:
        """Control tokens, and user-defined ones spelled like markup (`<...>`), as llama.cpp
        marks them (computed on first use: one attribute read per token)."""
        lib, vocab = self._lib, self._vocab
        control, user = lib.LLAMA_TOKEN_ATTR_CONTROL, lib.LLAMA_TOKEN_ATTR_USER_DEFINED
        ids = set()
        for token_id in range(self.vocab_size):
            attr = lib.llama_vocab_get_attr(vocab, token_id)
            if attr & control:
                ids.add(token_id)
            elif attr & user:
                piece = self.token_bytes(token_id)
                if piece.startswith(b"<") and piece.endswith(b">"):
                    ids.add(token_id)
        return frozenset(ids)

    def _valid(self, token_id: int) -> int | None:
        return token_id if 0 <= token_id < self.vocab_size else None

    def encode(self, text: str, *, add_bos: bool = False, parse_special: bool = False) -> list[int]:
        """Token ids of text; special-token spellings stay plain text unless parse_special."""
        data = clean(text).encode("utf-8")
        capacity = len(data) + 8  # a token covers at least one byte (plus BOS/EOS room)
        with self._lock:
            while True:
                buf = (self._lib.llama_token * capacity)()
                count = self._lib.llama_tokenize(
                    self._vocab, data, len(data), buf, capacity, False, parse_special
                )
                if count >= 0:
                    break
                capacity = -count  # llama.cpp tells how many it needs
            ids = list(buf[:count])
        if add_bos and self.bos_id is not None:
            ids.insert(0, self.bos_id)
        return ids

    def decode(self, ids: list[int]) -> str:
        """Text of ids (special tokens rendered as their text)."""
        if not ids:
            return ""
        tokens = (self._lib.llama_token * len(ids))(*ids)
        capacity = max(64, 8 * len(ids))
        while True:
            out = ctypes.create_string_buffer(capacity)
            written = self._lib.llama_detokenize(
                self._vocab, tokens, len(ids), out, capacity, False, True
            )
            if written >= 0:
                return out.raw[:written].decode("utf-8", errors="replace")
            capacity = -written

    def token_bytes(self, token_id: int) -> bytes:
        """The raw bytes one token contributes (byte-fallback tokens give their single byte)."""
        cached = self._bytes_cache.get(token_id)
        if cached is not None:
            return cached
        if not 0 <= token_id < self.vocab_size:
            raise ValueError(f"token id {token_id} is outside the vocabulary ({self.vocab_size})")
        with self._lock:
            size = self._lib.llama_token_to_piece(
                self._vocab, token_id, self._piece_buf, len(self._piece_buf), 0, True
            )
            if size < 0:  # longer than the buffer: grow once to the size llama.cpp asks for
                self._piece_buf = ctypes.create_string_buffer(-size)
                size = self._lib.llama_token_to_piece(
                    self._vocab, token_id, self._piece_buf, len(self._piece_buf), 0, True
                )
            piece = self._piece_buf.raw[:size]
        self._bytes_cache[token_id] = piece
        return piece
