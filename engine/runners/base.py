"""The seam between the engine's bookkeeping and a runner's tensors.

The scheduler decides, per step, which sequences run which tokens; the BlockManager decides which
physical KV blocks hold them. A runner only turns that plan into logits and moves KV bytes when
told to. Block ids are the engine's: the torch runner indexes its pools with them directly; the
llama.cpp runner maps them onto its own sequence memory (seq_cp / seq_rm / seq_add).

Slot of token i of a sequence = block_table[i // block_size] * block_size + i % block_size.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import numpy as np

    from ember.models.text.tokenizers.base import Tokenizer


@dataclass
class SeqStep:
    """One sequence's share of a forward pass."""

    seq_id: int
    token_ids: list[int]  # new tokens this step: a prefill chunk, 1 decode token, or 1 + k drafts
    positions: list[int]  # RoPE position of each new token (re-based after sink eviction)
    num_cached: int  # tokens of this sequence already in the KV cache (cache index of token_ids[0])
    block_table: list[int]  # physical blocks covering num_cached + len(token_ids) tokens
    num_logits: int = 1  # logits are wanted for the last num_logits new tokens


@dataclass
class ForwardBatch:
    """Several sequences in one forward (continuous batching)."""

    steps: list[SeqStep] = field(default_factory=list)
    # the caller reads the logits before it calls the runner again: a runner may hand out
    # read-only views of its own buffers instead of copies (llama.cpp: a 262k-entry row a token)
    borrow_logits: bool = False

    @property
    def num_tokens(self) -> int:
        return sum(len(s.token_ids) for s in self.steps)


@dataclass(frozen=True)
class RunnerInfo:
    """What a loaded runner is and can do."""

    name: str  # "torch" | "llama.cpp" | "remote"
    device: str
    architecture: str
    vocab_size: int
    context_limit: int  # the model's trained context length
    kv_bytes_per_token: int  # all layers, K and V
    model_digest: str  # SHA-256 of the weights (keys disk snapshots)
    dtype: str  # KV dtype name (keys disk snapshots)
    supports_shift: bool = True  # can re-base positions of kept keys (sink window)


class Runner(Protocol):
    """Turns a ForwardBatch into logits over a block-addressed KV cache."""

    # Read-only in the contract (the engine never sets them): a runner may keep plain attributes
    # or properties, and a narrower tokenizer type (FakeTokenizer) still satisfies it.
    @property
    def info(self) -> RunnerInfo: ...

    @property
    def tokenizer(self) -> Tokenizer: ...

    def init_kv(self, num_blocks: int, block_size: int) -> None:
        """Allocate (or re-allocate) the KV store for num_blocks blocks of block_size tokens."""
        ...

    def forward(self, batch: ForwardBatch) -> list[np.ndarray]:
        """Run the batch; per step, float32 logits of shape (num_logits, vocab_size)."""
        ...

    def copy_block(self, src_block: int, dst_block: int, num_tokens: int) -> None:
        """Copy the first num_tokens KV slots of src_block into dst_block (copy-on-write)."""
        ...

    def shift_positions(self, seq_id: int, block_ids: list[int], delta: int) -> None:
        """Re-base the keys stored in block_ids by delta positions (RoPE shift after eviction).

        Called before the forward of the step that needs it; the engine has already made these
        blocks private to seq_id (copy-on-write), and every slot of them up to the sequence's
        cache length holds a key. After the shift, cache index == position again.
        """
        ...

    def release(self, seq_id: int) -> None:
        """Forget per-sequence runner state (llama.cpp sequence slots); blocks are the engine's."""
        ...

    def read_blocks(self, block_ids: list[int]) -> bytes:
        """Serialize the KV bytes of these blocks (for disk snapshots).

        Any layout, as long as write_blocks inverts it; the engine's disk store calls both with
        one block at a time and needs the same byte count for every block.
        """
        ...

    def write_blocks(self, block_ids: list[int], data: bytes) -> None:
        """Load KV bytes produced by read_blocks into these blocks."""
        ...

    def close(self) -> None: ...
