"""DraftModelProposer: a second, smaller model (or a cheaper form of the target) drafts k tokens.

The draft runs through its own Runner and its own KV blocks (a private BlockManager). Per target
sequence it keeps a mirror Sequence whose cache holds a prefix of the target's tokens plus the
drafts of the last step. At each proposal the mirror is synced: its cache is truncated to the
longest prefix it shares with the target's tokens, which rolls back the rejected drafts' KV
(BlockManager.truncate frees their blocks; the slots are rewritten before they are read again),
then the target's new tokens are fed and k tokens are drafted one forward each.

Greedy targets get greedy drafts (point masses: the engine's rule verifies them); sampled
targets get drafts sampled from the draft's own sampling distribution q, which draft_probs()
hands to verify_sampled() for the min(1, p/q) rule.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ember.engine.block_manager import BlockManager
from ember.engine.errors import EngineError
from ember.engine.runners.base import ForwardBatch, SeqStep
from ember.engine.sampling import make_generator
from ember.engine.sequence import Sequence
from ember.engine.speculative.adaptive import AdaptiveDraftLength
from ember.engine.speculative.verify import draw, sampling_probs

if TYPE_CHECKING:
    from ember.engine.runners.base import Runner
    from ember.models.text.tokenizers.base import Tokenizer

log = logging.getLogger("ember.engine.speculative.verify")


def check_same_tokenizer(target: Tokenizer, draft: Tokenizer, target_name: str, name: str) -> None:
    """Refuse a draft whose token ids mean something else than the target's (EngineError)."""

    def refuse(reason: str) -> EngineError:
        return EngineError(
            f"draft model {name} cannot draft for {target_name}: their tokenizers differ "
            f"({reason}); pick a draft from the same model family"
        )

    if target.vocab_size != draft.vocab_size:
        raise refuse(f"vocabulary of {draft.vocab_size} tokens vs {target.vocab_size}")
    for label in ("bos_id", "eos_id"):
        if getattr(target, label) != getattr(draft, label):
            raise refuse(f"{label} {getattr(draft, label)} vs {getattr(target, label)}")
    for token_id in range(target.vocab_size):
        theirs, ours = draft.token_bytes(token_id), target.token_bytes(token_id)
        if theirs != ours:
            raise refuse(f"token {token_id} is {theirs!r} in the draft, {ours!r} in the target")


@dataclass
class _Mirror:
    """The draft's copy of one target sequence."""

    target: Sequence
    seq: Sequence  # token ids = target prefix + last drafts; block_table in the draft's pool
    rng: np.random.Generator


class DraftModelProposer:
    """Proposer backed by a draft Runner with its own paged KV cache."""

    def __init__(
        self,
        runner: Runner,
        *,
        name: str = "draft",
        ctx: int = 4096,
        block_size: int = 16,
        max_seqs: int = 1,
        num_blocks: int = 0,
        adaptive: AdaptiveDraftLength | None = None,
    ) -> None:
        self.runner = runner
        self.name = name
        limit = runner.info.context_limit
        self.max_seq_tokens = min(ctx, limit) if limit else ctx
        per_seq = -(-self.max_seq_tokens // block_size) + 1
        self.blocks = BlockManager(
            num_blocks or per_seq * max(1, max_seqs), block_size, enable_prefix_cache=False
        )
        runner.init_kv(self.blocks.num_blocks, block_size)
        self.adaptive = adaptive
        self._mirrors: dict[int, _Mirror] = {}
        self._probs: dict[int, np.ndarray] = {}
        self.num_forward_calls = 0

    # ---- Proposer -------------------------------------------------------------------------
    def propose(self, seq: Sequence, max_tokens: int) -> list[int]:
        """Draft up to max_tokens tokens after seq.token_ids with the draft model."""
        self._sweep()
        self._probs.pop(seq.seq_id, None)
        k = self.adaptive.begin(seq, max_tokens) if self.adaptive else max_tokens
        drafts: list[int] = []
        if k > 0:
            mirror = self._sync(seq, k)
            if mirror is not None:
                drafts, probs = self._draft(mirror, k)
                if probs is not None:
                    self._probs[seq.seq_id] = probs
        if self.adaptive is not None:
            self.adaptive.record(seq, drafts, len(drafts))
        return drafts

    def draft_probs(self, seq_id: int) -> np.ndarray | None:
        """(k, vocab) q of the last drafts of seq_id; None when they were greedy."""
        return self._probs.get(seq_id)

    def cached_token_ids(self, seq_id: int) -> list[int]:
        """The token ids whose KV the draft holds for a target sequence (tests, debugging)."""
        mirror = self._mirrors.get(seq_id)
        return mirror.seq.token_ids[: mirror.seq.num_processed] if mirror else []

    def close(self) -> None:
        """Free every mirror and close the draft runner."""
        for seq_id in list(self._mirrors):
            self._drop(seq_id)
        self.runner.close()

    # ---- internals ------------------------------------------------------------------------
    def _sweep(self) -> None:
        for seq_id, mirror in list(self._mirrors.items()):
            if mirror.target.is_finished:
                self._drop(seq_id)

    def _drop(self, seq_id: int) -> None:
        mirror = self._mirrors.pop(seq_id)
        self.blocks.free(mirror.seq)
        self.runner.release(mirror.seq.seq_id)
        self._probs.pop(seq_id, None)
        if self.adaptive is not None:
            self.adaptive.forget(seq_id)

    def _sync(self, target: Sequence, num_drafts: int) -> _Mirror | None:
        """Roll the mirror back to its common prefix with target; room for the new tokens."""
        tokens = target.token_ids
        if len(tokens) + num_drafts > self.max_seq_tokens:
            if target.seq_id in self._mirrors:
                self._drop(target.seq_id)  # too long for the draft: stop drafting for it
            return None
        mirror = self._mirrors.get(target.seq_id)
        if mirror is None:
            draft_seq = Sequence(list(tokens), target.sampling)  # no blocks yet
            mirror = _Mirror(target, draft_seq, make_generator(_draft_seed(target)))
            self._mirrors[target.seq_id] = mirror
        draft_seq = mirror.seq
        cached = draft_seq.token_ids[: draft_seq.num_processed]
        common = 0
        for ours, theirs in zip(cached, tokens, strict=False):
            if ours != theirs:
                break
            common += 1
        common = min(common, len(tokens) - 1)  # feed at least one token to get logits
        self.blocks.truncate(draft_seq, common)  # rejected drafts' KV leaves the cache here
        draft_seq.token_ids = list(tokens)
        need = len(tokens) + num_drafts - 1 - common  # new tokens + all drafts but the last
        if not self.blocks.can_append(draft_seq, need):
            return None
        self.blocks.append(draft_seq, need)
        return mirror

    def _draft(self, mirror: _Mirror, num_drafts: int) -> tuple[list[int], np.ndarray | None]:
        draft_seq, params = mirror.seq, mirror.target.sampling
        vocab = self.runner.tokenizer.vocab_size
        feed = draft_seq.token_ids[draft_seq.num_processed :]
        drafts: list[int] = []
        q_rows: list[np.ndarray] = []
        for i in range(num_drafts):
            start = draft_seq.num_processed
            step = SeqStep(
                seq_id=draft_seq.seq_id,
                token_ids=feed,
                positions=list(range(start, start + len(feed))),
                num_cached=start,
                block_table=list(draft_seq.block_table),
            )
            self.num_forward_calls += 1
            logits = self.runner.forward(ForwardBatch([step]))[0][-1][:vocab]  # (vocab,)
            draft_seq.num_processed += len(feed)
            q = sampling_probs(logits, params, draft_seq.token_ids)
            token = int(np.argmax(q)) if params.temperature == 0.0 else draw(q, mirror.rng)
            drafts.append(token)
            q_rows.append(q)
            draft_seq.token_ids.append(token)
            feed = [token]
            if i + 1 < num_drafts and token in self.runner.tokenizer.eot_ids:
                break  # the target stops here if it accepts: drafting on is wasted work
        probs = None if params.temperature == 0.0 else np.stack(q_rows)
        return drafts, probs


def _draft_seed(target: Sequence) -> int | None:
    seed = target.sampling.seed
    return None if seed is None else seed + 0x5EED
