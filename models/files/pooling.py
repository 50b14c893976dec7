"""How an embedding model pools token states into one vector, from its GGUF metadata.

`{arch}.pooling_type` uses llama.cpp's enum: 0 none (a generative model), 1 mean, 2 cls,
3 last (decoder embedders such as Qwen3-Embedding), 4 rank (a reranker's score head). A file
without the key is a generative model.
"""

from __future__ import annotations

from typing import Any

from ember.models.errors import ModelFileError

POOLING_TYPES = {0: "none", 1: "mean", 2: "cls", 3: "last", 4: "rank"}
SENTENCE_POOLINGS = frozenset({"mean", "cls", "last"})  # what makes an embedding model


def gguf_pooling(metadata: dict[str, Any]) -> str | None:
    """The declared pooling ("none", "mean", "cls", "last", "rank"), None when not declared."""
    arch = metadata.get("general.architecture")
    key = f"{arch}.pooling_type"
    value = metadata.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value not in POOLING_TYPES:
        raise ModelFileError(f"metadata key {key}: unknown pooling type {value!r}")
    return POOLING_TYPES[value]
