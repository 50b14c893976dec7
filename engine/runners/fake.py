"""A deterministic FakeRunner (and byte-level FakeTokenizer) so engine bookkeeping is testable.

The fake KV store keeps, per slot, the token id and the RoPE position written there. The logits
of a query token are a fixed random function of every (token, query position - key position)
pair read through the sequence's block table, so a wrong block table, slot, position or shift
changes the output. `reference_logits` computes the same function over a plain contiguous list.
"""

from __future__ import annotations

from collections.abc import Sequence as Seq
from typing import Any

import numpy as np

from ember.engine.api import ChatMessage
from ember.engine.errors import EngineError
from ember.engine.runners.base import ForwardBatch, RunnerInfo
from ember.text import clean

BOS_ID, EOS_ID, EOT_ID = 1, 2, 3
_SPECIALS = {BOS_ID: "<bos>", EOS_ID: "<eos>", EOT_ID: "<eot>"}
_BYTE_OFFSET = 4
FAKE_VOCAB = _BYTE_OFFSET + 256


class FakeTokenizer:
    """Byte-level tokenizer: ids 4..259 are bytes, 1/2/3 are <bos>/<eos>/<eot>."""

    vocab_size = FAKE_VOCAB
    bos_id: int | None = BOS_ID
    eos_id: int | None = EOS_ID
    eot_ids: frozenset[int] = frozenset({EOS_ID, EOT_ID})
    special_ids: frozenset[int] = frozenset(_SPECIALS)
    add_bos = True

    def encode(self, text: str, *, add_bos: bool = False, parse_special: bool = False) -> list[int]:
        """Token ids of text; special spellings become control ids only with parse_special."""
        ids = [BOS_ID] if add_bos else []
        rest = clean(text)
        while rest:
            special = next(
                (i for i, s in _SPECIALS.items() if parse_special and rest.startswith(s)), None
            )
            if special is not None:
                ids.append(special)
                rest = rest[len(_SPECIALS[special]) :]
                continue
            ids.extend(b + _BYTE_OFFSET for b in rest[0].encode("utf-8"))
            rest = rest[1:]
        return ids

    def decode(self, ids: list[int]) -> str:
        """Text of ids (special tokens rendered as their spelling)."""
        return b"".join(self.token_bytes(i) for i in ids).decode("utf-8", errors="replace")

    def token_bytes(self, token_id: int) -> bytes:
        """The raw bytes one token contributes."""
        if token_id in _SPECIALS:
            return _SPECIALS[token_id].encode()
        if _BYTE_OFFSET <= token_id < FAKE_VOCAB:
            return bytes([token_id - _BYTE_OFFSET])
        return b""


def fake_chat_ids(tokenizer: FakeTokenizer, messages: Seq[ChatMessage]) -> list[int]:
    """A tiny chat format: <bos>, then `role: content<eot>` per turn, then `assistant: `."""
    ids = [BOS_ID]
    for message in messages:
        ids += tokenizer.encode(f"{message.role}: {message.content}") + [EOT_ID]
    return ids + tokenizer.encode("assistant: ")


class FakeChat:
    """fake_chat_ids as a chat renderer that also takes tools (Ember's generic tool format)."""

    tool_format = "generic"

    def __init__(self, tokenizer: FakeTokenizer) -> None:
        self.tokenizer = tokenizer

    def __call__(
        self, messages: Seq[ChatMessage], tools: Seq[Any] = (), template_kwargs: Any = None
    ) -> list[int]:
        from ember.models.text.tool_calls import GENERIC, template_inputs

        dicts = [m.template_dict() for m in messages]
        dicts, _ = template_inputs(dicts, [t.as_dict() for t in tools], GENERIC)
        turns = [ChatMessage(d["role"], d["content"]) for d in dicts]
        return fake_chat_ids(self.tokenizer, turns)


class FakeRunner:
    """Implements the Runner protocol over a fake block-addressed KV store (numpy, float64)."""

    def __init__(self, *, dim: int = 32, seed: int = 0, context_limit: int = 1 << 20) -> None:
        rng = np.random.default_rng(seed)
        self.tokenizer = FakeTokenizer()
        self.info = RunnerInfo(
            name="fake",
            device="cpu",
            architecture="fake",
            vocab_size=FAKE_VOCAB,
            context_limit=context_limit,
            kv_bytes_per_token=16,
            model_digest=f"fake-{dim}-{seed}",
            dtype="int64",
        )
        self._period = 97  # relative positions enter through R[rel mod 97]
        self._embed = rng.standard_normal((FAKE_VOCAB, dim))
        self._rel = rng.standard_normal((self._period, dim))
        self._unembed = rng.standard_normal((FAKE_VOCAB, dim)) * 3.0
        self.block_size = 0
        self.tokens = np.zeros((0, 0), dtype=np.int64)  # (num_blocks, block_size)
        self.positions = np.zeros((0, 0), dtype=np.int64)
        self.written = np.zeros((0, 0), dtype=bool)
        self.num_forward_tokens = 0  # tokens computed so far (prefix hits skip these)
        self.num_forward_calls = 0
        self.released: list[int] = []
        self.closed = False

    # ---- Runner protocol --------------------------------------------------------------------
    def init_kv(self, num_blocks: int, block_size: int) -> None:
        """Allocate the fake store for num_blocks blocks of block_size slots."""
        self.block_size = block_size
        self.tokens = np.zeros((num_blocks, block_size), dtype=np.int64)
        self.positions = np.zeros((num_blocks, block_size), dtype=np.int64)
        self.written = np.zeros((num_blocks, block_size), dtype=bool)

    def forward(self, batch: ForwardBatch) -> list[np.ndarray]:
        """Write each step's tokens into its slots, then score the last num_logits of them."""
        self.num_forward_calls += 1
        out: list[np.ndarray] = []
        for step in batch.steps:
            count = len(step.token_ids)
            if len(step.positions) != count or not 1 <= step.num_logits <= count:
                raise EngineError(f"fake runner: malformed step for seq {step.seq_id}")
            blocks, offsets = self._slots(step.block_table, step.num_cached, count)
            self.tokens[blocks, offsets] = step.token_ids
            self.positions[blocks, offsets] = step.positions
            self.written[blocks, offsets] = True
            self.num_forward_tokens += count
            rows = []
            for i in range(count - step.num_logits, count):
                end = step.num_cached + i + 1  # causal: the query sees cache[0 : end]
                kb, ko = self._slots(step.block_table, 0, end)
                if not self.written[kb, ko].all():
                    raise EngineError(f"fake runner: seq {step.seq_id} reads an unwritten slot")
                rows.append(
                    self._score(self.tokens[kb, ko], self.positions[kb, ko], step.positions[i])
                )
            out.append(np.stack(rows).astype(np.float32))
        return out

    def copy_block(self, src_block: int, dst_block: int, num_tokens: int) -> None:
        """Copy the first num_tokens slots of src_block into dst_block."""
        for store in (self.tokens, self.positions, self.written):
            store[dst_block, :num_tokens] = store[src_block, :num_tokens]

    def shift_positions(self, seq_id: int, block_ids: list[int], delta: int) -> None:
        """Re-base the stored positions of these blocks by delta (the K-shift)."""
        ids = np.asarray(block_ids, dtype=np.int64)
        self.positions[ids] += np.where(self.written[ids], delta, 0)

    def release(self, seq_id: int) -> None:
        self.released.append(seq_id)

    def read_blocks(self, block_ids: list[int]) -> bytes:
        """Block-major bytes: per block, tokens then positions then written flags."""
        ids = np.asarray(block_ids, dtype=np.int64)
        parts = [self.tokens[ids], self.positions[ids], self.written[ids].astype(np.int64)]
        return np.stack(parts, axis=1).tobytes()  # (blocks, 3, block_size) int64

    def write_blocks(self, block_ids: list[int], data: bytes) -> None:
        """Load bytes produced by read_blocks into these blocks."""
        arr = np.frombuffer(data, dtype=np.int64).reshape(len(block_ids), 3, self.block_size)
        ids = np.asarray(block_ids, dtype=np.int64)
        self.tokens[ids], self.positions[ids] = arr[:, 0], arr[:, 1]
        self.written[ids] = arr[:, 2].astype(bool)

    def close(self) -> None:
        self.closed = True

    # ---- the fake model ---------------------------------------------------------------------
    def reference_logits(self, context: Seq[int]) -> np.ndarray:
        """Logits after a plain contiguous context at positions 0..len-1 (the reference)."""
        keys = np.asarray(context, dtype=np.int64)
        return self._score(keys, np.arange(keys.size), keys.size - 1).astype(np.float32)

    def _score(self, keys: np.ndarray, key_pos: np.ndarray, query_pos: int) -> np.ndarray:
        # h = sum_j E[tok_j] * R[(q - p_j) mod P] / sqrt(n);  logits = U @ tanh(h)   (vocab,)
        rel = np.mod(query_pos - key_pos, self._period)
        hidden = (self._embed[keys] * self._rel[rel]).sum(axis=0) / np.sqrt(keys.size)
        return self._unembed @ np.tanh(hidden)

    def _slots(self, table: list[int], start: int, count: int) -> tuple[np.ndarray, np.ndarray]:
        index = np.arange(start, start + count)
        if count and index[-1] // self.block_size >= len(table):
            raise EngineError(f"fake runner: block table of {len(table)} blocks is too short")
        return np.asarray(table, dtype=np.int64)[index // self.block_size], index % self.block_size
