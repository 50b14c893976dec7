"""RequestState: one request's detokenizer, random generator, stop rules, counters and events."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ember.engine.api import EngineInfo, Event, Finished, Stats, TextDelta, TokenLogprob, TopLogprob
from ember.engine.detokenizer import Detokenizer
from ember.engine.dry import DryBreakers, breakers_for
from ember.engine.logprob_trail import LogprobTrail
from ember.engine.logprobs import Scored
from ember.engine.loop_detector import LoopDetector
from ember.engine.reply_ids import visible_reply_ids
from ember.engine.sampling import make_generator
from ember.engine.sequence import Sequence
from ember.models.text.tokenizers.base import Tokenizer

if TYPE_CHECKING:
    from ember.engine.constraint import Constraint
    from ember.engine.reasoning_budget import ReasoningBudget


@dataclass
class RequestState:
    """What the engine tracks for a request beside its Sequence."""

    seq: Sequence
    detok: Detokenizer
    rng: np.random.Generator
    stop_ids: frozenset[int]
    on_event: Callable[[Event], None]
    loop: LoopDetector
    dry: DryBreakers | None = None  # DRY's sequence breakers, compiled for this vocabulary
    output_ids: list[int] = field(default_factory=list)  # generated ids, stop token excluded
    trail: LogprobTrail = field(default_factory=LogprobTrail)  # ids not yet in a TextDelta
    logprobs: list[TokenLogprob] = field(default_factory=list)  # every one reported so far
    num_sampled: int = 0
    drafted: int = 0
    accepted: int = 0
    constraint: Constraint | None = None  # the reply's grammar; advanced by every accepted token
    draft_cut: int | None = None  # this step's drafts were cut here by the constraint
    reasoning: ReasoningBudget | None = None  # counts <think> tokens, forces </think> at the end

    @classmethod
    def create(
        cls,
        seq: Sequence,
        tokenizer: Tokenizer,
        stop_ids: frozenset[int],
        on_event: Callable[[Event], None],
        extra_stop: tuple[str, ...] = (),
        lstrip: bool = False,
    ) -> RequestState:
        """extra_stop: the chat format's stop strings (the base-model scaffold's next turn);
        lstrip: drop the reply's leading whitespace."""
        stop = tuple(dict.fromkeys(seq.sampling.stop + extra_stop))
        detok = Detokenizer(tokenizer, stop, lstrip=lstrip)
        sampling = seq.sampling
        dry = None
        if sampling.dry_multiplier > 0 and sampling.dry_sequence_breakers:
            dry = breakers_for(tokenizer, sampling.dry_sequence_breakers)
        loop = LoopDetector(0 if sampling.ignore_eos else sampling.loop_min_tokens)
        return cls(seq, detok, make_generator(sampling.seed), stop_ids, on_event, loop, dry)

    def accept(self, token: int, scored: Scored | None = None) -> str | None:
        """Take one sampled token (scored: its logprobs, when the request asked); return a
        finish reason when generation must end."""
        self.num_sampled += 1
        if token in self.stop_ids:
            return "stop"
        if self.constraint is not None:
            self.constraint.advance(token)
        if self.reasoning is not None:
            self.reasoning.advance(token)
        self.output_ids.append(token)
        self.trail.add(token, self.detok.tokenizer.token_bytes(token), scored, self._top(scored))
        self._emit(self.detok.add(token))
        if self.detok.stopped or (self.constraint is not None and self.constraint.done):
            return "stop"
        if self.loop.add(token):
            return "loop"
        if len(self.output_ids) >= self.seq.sampling.max_tokens:
            return "length"
        return None

    def finish(self, reason: str, error: str, info: EngineInfo, context_limit: int) -> None:
        """Flush held text and send the Finished event with the request's Stats."""
        seq = self.seq
        seq.finish_s = time.perf_counter()
        self._emit(self.detok.flush(), final=True)
        stats = Stats(
            runner=info.runner,
            device=info.device,
            prompt_tokens=seq.num_prompt_tokens,
            cached_tokens=seq.num_prefix_hit_tokens,
            generated_tokens=len(self.output_ids),
            evicted_tokens=seq.num_evicted,
            drafted_tokens=self.drafted,
            accepted_tokens=self.accepted,
            context_tokens=seq.num_kv_tokens,
            context_limit=context_limit,
        )
        if seq.first_token_s:
            stats.ttft_s = seq.first_token_s - seq.arrival_s
            computed = seq.num_prompt_tokens - seq.num_prefix_hit_tokens
            prefill_s = seq.first_token_s - (seq.first_scheduled_s or seq.arrival_s)
            stats.prefill_tok_s = computed / prefill_s if prefill_s > 0 else 0.0
            decode_s = seq.finish_s - seq.first_token_s
            if self.num_sampled > 1 and decode_s > 0:
                stats.decode_tok_s = (self.num_sampled - 1) / decode_s
        self.on_event(
            Finished(
                reason=reason,  # type: ignore[arg-type]
                text=self.detok.output_text,
                token_ids=tuple(self.output_ids),
                stats=stats,
                error=error,
                logprobs=tuple(self.logprobs),
                stop_sequence=self._stop_sequence(reason),
                prompt_ids=tuple(seq.prompt_ids),
                reply_ids=self._reply_ids(),
            )
        )

    def _reply_ids(self) -> tuple[int, ...]:
        detok = self.detok
        return visible_reply_ids(
            self.output_ids, detok.tokenizer, detok.output_text, detok.stripped_text
        )

    def _stop_sequence(self, reason: str) -> str:
        """The request's own stop string that ended the reply (not a chat format's)."""
        matched = self.detok.matched
        return matched if reason == "stop" and matched in self.seq.sampling.stop else ""

    def _top(self, scored: Scored | None) -> tuple[TopLogprob, ...]:
        if scored is None:
            return ()
        token_bytes = self.detok.tokenizer.token_bytes
        return tuple(TopLogprob(i, token_bytes(i), lp) for i, lp in scored.top)

    def _emit(self, text: str, *, final: bool = False) -> None:
        """Report released text with the tokens it completes (final: all the rest)."""
        if not text and not (final and self.trail.pending):
            return
        ids, logprobs = self.trail.release(text, self.detok.stripped, final)
        self.logprobs += logprobs
        self.on_event(TextDelta(text, ids, logprobs))
