"""Sentence embeddings: the Embedder contract and its result (engine/load.py loads one).

An embedding model is a GGUF file whose metadata declares how token states pool into one vector
(`{arch}.pooling_type`: mean, cls or last), run by llama.cpp (runners/llamacpp/embedder.py).
A generative (chat) model declares no pooling; it is served mean-pooled over its last hidden
states, as Ollama and llama-server `--pooling mean` do, so a client gets vectors from whatever
model it names (EmbedderInfo.trained says which kind it got; such vectors rank worse than an
embedding model's). A reranker (`rank` pooling) is refused: its head gives a score, not a vector.

No torch, no llama_cpp at import: the server imports this module freely.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ember.engine.errors import EngineError

if TYPE_CHECKING:
    import numpy as np


POOLINGS = ("mean", "cls", "last")  # what an embedding model may declare (llama.cpp's names)
EmbeddingInput = str | Sequence[int]  # text, or token ids used as given


class CannotEmbed(EngineError):
    """The model or runner cannot give embeddings (the request's fault, not a load failure)."""


class InputRejected(EngineError):
    """One input cannot be embedded (empty, ids outside the vocabulary, over the context)."""

    def __init__(self, index: int, reason: str) -> None:
        super().__init__(f"input[{index}]: {reason}")
        self.index = index
        self.reason = reason


@dataclass(frozen=True)
class EmbedderInfo:
    """What an embedding model is: its name, runner, pooling and vector size."""

    model: str
    runner: str
    device: str
    architecture: str
    dimensions: int
    pooling: str  # one of POOLINGS
    trained: bool  # the file declares this pooling (an embedding model); False: a chat model
    context_limit: int  # most tokens one input may have
    vocab_size: int

    def __post_init__(self) -> None:
        if self.pooling not in POOLINGS:
            raise EngineError(f"embedder pooling {self.pooling!r}: must be one of {POOLINGS}")
        if self.dimensions < 1 or self.context_limit < 1 or self.vocab_size < 1:
            raise EngineError("embedder dimensions, context_limit and vocab_size must be >= 1")


@dataclass(frozen=True)
class Embeddings:
    """Vectors for a list of inputs, in input order, and the tokens they took."""

    vectors: np.ndarray  # float32 (num_inputs, dimensions)
    token_counts: tuple[int, ...]  # tokens of each input (after truncation)

    @property
    def prompt_tokens(self) -> int:
        return sum(self.token_counts)


@runtime_checkable
class Embedder(Protocol):
    """A loaded embedding model (thread-safe: calls are serialized inside)."""

    @property
    def info(self) -> EmbedderInfo: ...

    def tokenize(self, text: str) -> list[int]:
        """The ids an input text becomes (with the model's own start and end tokens)."""
        ...

    def embed(
        self, inputs: Sequence[EmbeddingInput], *, normalize: bool = True, truncate: bool = False
    ) -> Embeddings:
        """One vector per input (L2-normalized when normalize). An input longer than
        info.context_limit raises InputRejected naming its index, unless truncate."""
        ...

    def close(self) -> None: ...
