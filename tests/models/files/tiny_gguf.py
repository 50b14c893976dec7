"""Tiny valid GGUF files and safetensors folders for the registry and Hub tests (built in ms)."""

from __future__ import annotations

from pathlib import Path


def write_tiny_gguf(path: Path, arch: str = "llama", rows: int = 8, seed: int = 0) -> Path:
    """A small valid GGUF: a complete 2-layer `arch` model with `rows` vocabulary rows, context 128.

    open_gguf checks every tensor against the hyperparameters, so a file that only claims an
    architecture is refused; the builder lives in tests/fixtures/quick_gguf.py.
    """
    from tests.fixtures.quick_gguf import write_tiny_gguf as write_model

    path.parent.mkdir(parents=True, exist_ok=True)
    return write_model(path, arch, n_vocab=max(rows, 4), context_length=128, seed=seed)


def write_tiny_safetensors(folder: Path, model_type: str = "llama", shards: int = 1) -> Path:
    """A tiny complete HF folder (config.json, tokenizer files, shards + index) of `model_type`."""
    from tests.fixtures.quick_hf import write_tiny_hf

    return write_tiny_hf(folder, model_type, n_shards=shards)
