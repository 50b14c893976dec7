"""The Engine: owns a runner, the KV bookkeeping and the step loop; turns requests into events.

step() = schedule -> KV copies and shifts -> runner.forward -> sample (or verify drafts) ->
append -> register full blocks -> detokenize -> emit TextDelta / Finished. Single-threaded: the
EngineThread (engine_thread.py) owns one Engine and feeds it from other threads.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ember.engine.api import (
    AUTO_CTX,
    DRY_BREAKERS,
    EngineInfo,
    EngineOptions,
    Event,
    Finished,
    GenerationRequest,
    ModelFiles,
    Stats,
)
from ember.engine.block_manager import BlockManager
from ember.engine.constraint import ConstraintCompiler
from ember.engine.dry import BreakerPrecompile
from ember.engine.errors import EngineError
from ember.engine.forward import apply_kv_work, pool_blocks, seq_step
from ember.engine.logit_bias import resolve_logit_bias
from ember.engine.prompt import ChatRenderer, PromptEncoder
from ember.engine.reasoning_budget import ReasoningBudget
from ember.engine.request_state import RequestState
from ember.engine.runners.base import ForwardBatch, SeqStep
from ember.engine.scheduler import (
    Proposer,
    ScheduledSeq,
    Scheduler,
    SchedulerConfig,
)
from ember.engine.sequence import Sequence
from ember.engine.speculative.choice import create_proposer
from ember.engine.speculative.verify import close_proposer
from ember.engine.step_sampling import sample_step, score_samples
from ember.engine.streaming import SinkWindow
from ember.models.text.reasoning_markers import reasoning_markers
from ember.text import describe

if TYPE_CHECKING:
    from ember.engine.prefix_store import PrefixStore
    from ember.engine.runners.base import Runner

log = logging.getLogger("ember.engine")

EventSink = Callable[[Event], None]


class Engine:
    """A loaded model plus its scheduler; call add_request() then step() until idle."""

    def __init__(
        self,
        runner: Runner,
        options: EngineOptions,
        *,
        chat: ChatRenderer | None = None,
        prefix_store: PrefixStore | None = None,
        proposer: Proposer | None = None,
        model_name: str = "",
        context_note: str = "",
    ) -> None:
        self.runner = runner
        self.options = options
        self.tokenizer = runner.tokenizer
        self.chat = chat
        self.chat_stop: tuple[str, ...] = tuple(getattr(chat, "stop", ()))  # ChatFormat extras
        self.chat_lstrip = bool(getattr(chat, "lstrip_reply", False))
        self.prefix_store = prefix_store if options.prefix_cache else None
        ctx = (
            min(options.ctx, runner.info.context_limit)
            if runner.info.context_limit
            else options.ctx
        )
        self.ctx = ctx
        self.sink_window = SinkWindow.from_options(
            options.sink, options.window, ctx, options.block_size
        )
        limit = self.sink_window.limit_tokens if self.sink_window.enabled else ctx
        num_blocks = pool_blocks(options, runner.info.kv_bytes_per_token, limit)
        runner.init_kv(num_blocks, options.block_size)
        self.blocks = BlockManager(
            num_blocks, options.block_size, enable_prefix_cache=options.prefix_cache
        )
        config = SchedulerConfig(
            max_batch_seqs=options.max_batch,
            max_batch_tokens=max(options.prefill_chunk, options.max_batch),
            prefill_chunk=options.prefill_chunk,
            max_seq_tokens=ctx,
            draft_tokens=options.draft_tokens if proposer else 0,
        )
        self.scheduler = Scheduler(
            config, self.blocks, self.sink_window, proposer, draft_filter=self._filter_drafts
        )
        self.constraints = ConstraintCompiler(self.tokenizer, runner.info.vocab_size)
        self.context_limit = limit
        self.info = EngineInfo(
            model=model_name or options.model,
            runner=runner.info.name,
            device=runner.info.device,
            architecture=runner.info.architecture,
            context_limit=limit,
            features={
                "sink_window": self.sink_window.enabled,
                "prefix_cache": options.prefix_cache,
                "prefix_store": self.prefix_store is not None,
                "draft": proposer is not None,
                "batching": options.max_batch > 1,
                # the chat template reads enable_thinking (Qwen3's reasoning switch)
                "thinking_switch": bool(getattr(chat, "thinking_switch", False)),
                "base_chat": getattr(chat, "kind", "template") == "scaffold",
            },
            tool_format=str(getattr(chat, "tool_format", None) or "generic"),
            kv_cache=options.kv_cache,
            kv_element=runner.info.dtype,
            kv_cache_bytes=num_blocks * options.block_size * runner.info.kv_bytes_per_token,
            context_note=context_note,
        )
        self.prompts = PromptEncoder(
            self.tokenizer,
            chat,
            vocab_size=runner.info.vocab_size,
            model_name=self.info.model,
            tool_format=self.info.tool_format,
        )
        self._precompile: BreakerPrecompile | None = None  # DRY breakers, started by load()
        self._states: dict[int, RequestState] = {}  # by seq_id
        self._seq_of_request: dict[int, int] = {}

    @classmethod
    def load(
        cls,
        options: EngineOptions,
        model: ModelFiles | None,
        *,
        draft_model: ModelFiles | None = None,
    ) -> Engine:
        """Load model's runner, chat template and disk prefix store (model is None only for the
        fake runner); draft_model is the resolved `--draft MODEL`, if options.draft names one."""
        from ember.engine.runners.factory import load_parts

        runner, chat, name = load_parts(options, model)
        note = ""
        if options.ctx == AUTO_CTX:
            from ember.engine.context_size import auto_options

            try:
                options, note = auto_options(options, runner, model)
            except Exception:
                runner.close()
                raise
        store = None
        digest = runner.info.model_digest
        if options.prefix_cache and options.prefix_disk_bytes > 0 and options.prefix_cache_dir:
            from ember.engine.prefix_store import PrefixStore

            store = PrefixStore(
                Path(options.prefix_cache_dir),
                model_digest=digest,
                runner=runner.info.name,
                dtype=runner.info.dtype,
                block_size=options.block_size,
                max_bytes=options.prefix_disk_bytes,
            )
        proposer = None
        try:
            proposer = create_proposer(options, runner, name, draft_model)
            engine = cls(
                runner,
                options,
                chat=chat,
                prefix_store=store,
                proposer=proposer,
                model_name=name,
                context_note=note,
            )
            engine._precompile = BreakerPrecompile(runner.tokenizer, DRY_BREAKERS)
            return engine
        except Exception:
            close_proposer(proposer)
            runner.close()
            raise

    # ---- requests -------------------------------------------------------------------------
    def encode(self, request: GenerationRequest) -> list[int]:
        """The prompt token ids of a request (chat template, raw text or given ids)."""
        return self.prompts.encode(request)

    def count_tokens(self, request: GenerationRequest) -> int:
        return len(self.encode(request))

    def add_request(self, request: GenerationRequest, on_event: EventSink) -> None:
        """Queue a request; its events go to on_event (from inside step())."""
        ids = self.encode(request)
        self._refuse_oversized_tools(request, len(ids))
        sampling = resolve_logit_bias(request.sampling, self.tokenizer, self.runner.info.vocab_size)
        seq = Sequence(ids, sampling, request_id=request.request_id)
        chat = request.messages is not None and not self.prompts.takes_tool_path(request)
        # the chat format's stops end its turn, like an end-of-turn token: ignore_eos skips both;
        # the reply's leading space is the format's either way (a short reply is a prefix of a long)
        stops = chat and not request.sampling.ignore_eos
        state = RequestState.create(
            seq,
            self.tokenizer,
            self.prompts.stop_ids(request),
            on_event,
            extra_stop=self.chat_stop if stops else (),
            lstrip=self.chat_lstrip and chat,
        )
        spec = request.constraint or self.prompts.tool_constraint(request)
        if spec is not None:
            state.constraint = self.constraints.compile(spec)
        if request.sampling.reasoning_budget is not None:
            state.reasoning = ReasoningBudget.create(
                self.tokenizer,
                request.sampling.reasoning_budget,
                seq.token_ids,
                reasoning_markers(self.info.tool_format),
            )
        if self.prefix_store is not None:
            self.prefix_store.restore(seq.token_ids, self.blocks, self.runner)
        self.scheduler.add(seq)
        self._states[seq.seq_id] = state
        self._seq_of_request[request.request_id] = seq.seq_id

    def _refuse_oversized_tools(self, request: GenerationRequest, prompt_tokens: int) -> None:
        """Tools must stay in view: a prompt with tools that does not leave room for a reply in
        the context is refused before anything is compiled or computed (eviction would drop
        the tool definitions, and the request would spin through a prompt it cannot use)."""
        if not request.offered_tools or prompt_tokens < self.context_limit:
            return
        raise EngineError(
            f"request tools: the {len(request.offered_tools)} tools and the messages need "
            f"{prompt_tokens} prompt tokens; the context holds {self.context_limit} "
            "(offer fewer tools, or raise --ctx)"
        )

    def abort(self, request_id: int) -> None:
        """Stop a request now: its blocks are freed before this returns."""
        seq_id = self._seq_of_request.get(request_id)
        if seq_id is None:
            return
        seq = self.scheduler.abort(seq_id)
        if seq is not None:
            self._complete(self._states[seq_id], "abort")

    def fail_request(self, request_id: int, error: str) -> None:
        """End one request with reason "error" after an unexpected failure: its blocks are
        freed, its last event carries `error`; the other requests and the engine go on."""
        seq_id = self._seq_of_request.get(request_id)
        state = self._states.get(seq_id) if seq_id is not None else None
        if state is None:  # already finished: its Finished event went out
            return
        state.seq.finish_reason = "error"
        self.scheduler.abort(state.seq.seq_id)
        self._complete(state, "error", error)

    @property
    def has_work(self) -> bool:
        return self.scheduler.has_work

    def generate(self, request: GenerationRequest) -> Iterator[Event]:
        """Run one request to the end on this thread, yielding its events."""
        events: list[Event] = []
        self.add_request(request, events.append)
        done = False
        while not done:
            if not self.has_work:
                raise EngineError("engine went idle before the request finished")
            self.step()
            for event in events:
                yield event
                done = done or isinstance(event, Finished)
            events.clear()

    # ---- the step loop --------------------------------------------------------------------
    def step(self) -> None:
        """One scheduling round and one forward over every scheduled sequence."""
        out = self.scheduler.schedule()
        for seq in out.finished:
            self._complete(self._states[seq.seq_id], seq.finish_reason or "length")
        for seq in out.preempted:
            self.runner.release(seq.seq_id)
            log.info("seq %d preempted (KV pool full); it will be recomputed", seq.seq_id)
        apply_kv_work(self.runner, out)
        if not out.scheduled:
            return
        # the rows are sampled within this step: the runner may lend them (ForwardBatch)
        batch = ForwardBatch([self._seq_step(item) for item in out.scheduled], borrow_logits=True)
        try:
            logits = self.runner.forward(batch)
        except Exception as exc:  # a runner failure ends the scheduled requests, not the engine
            log.exception("runner forward failed")
            for item in out.scheduled:
                self.scheduler.finish(item.seq, "error")
                self._complete(self._states[item.seq.seq_id], "error", f"runner failed: {exc}")
            return
        now = time.perf_counter()
        for item, rows in zip(out.scheduled, logits, strict=True):
            try:
                self._after_forward(item, rows, now)
            except Exception as exc:  # sampling, detokenizing, a stop rule: this request only
                log.exception("request %d failed", item.seq.request_id)
                self.fail_request(item.seq.request_id, f"request failed: {describe(exc)}")

    def _seq_step(self, item: ScheduledSeq) -> SeqStep:
        seq = item.seq
        if not seq.first_scheduled_s:
            seq.first_scheduled_s = time.perf_counter()
        wants_logits = item.num_tokens == seq.num_pending
        return seq_step(seq, item.token_ids, 1 + len(item.draft_ids) if wants_logits else 1)

    def _after_forward(self, item: ScheduledSeq, rows: np.ndarray, now: float) -> None:
        seq = item.seq
        state = self._states[seq.seq_id]
        prefilling = seq.is_prefilling
        seq.num_processed += item.num_tokens
        if prefilling and self.options.progress and item.num_tokens < seq.num_prompt_tokens:
            # a prompt longer than one chunk: say how far its prefill is (app/progress.py)
            total = seq.num_prompt_tokens
            self.options.progress("prefill", min(seq.num_processed, total), total)
        if seq.num_pending:  # mid-prompt chunk: nothing to sample yet
            self.blocks.register_full_blocks(seq)
            return
        try:
            samples = sample_step(seq, state, rows, item.draft_ids, self.scheduler.proposer)
        except EngineError as exc:  # a constraint that cannot go on ends its request only
            self.scheduler.finish(seq, "error")
            self._complete(state, "error", str(exc))
            return
        accepted = len(samples) - 1 if item.draft_ids else 0
        if item.draft_ids:
            state.drafted += len(item.draft_ids)
            state.accepted += accepted
            seq.num_processed += accepted  # KV of the matching drafts is already in the cache
            self.blocks.truncate(seq, seq.num_kv_tokens)  # roll back the rejected drafts
        if not seq.first_token_s:
            seq.first_token_s = now
        scores = score_samples(seq, rows, item.draft_ids, samples)
        for token, scored in zip(samples, scores, strict=True):
            seq.token_ids.append(token)
            reason = state.accept(token, scored)
            if reason:
                self.blocks.register_full_blocks(seq)
                self._finish_running(seq, state, reason)
                return
        self.blocks.register_full_blocks(seq)

    def _filter_drafts(self, seq: Sequence, drafts: list[int]) -> list[int]:
        """Drafts the request's constraint allows (the longest valid prefix)."""
        state = self._states.get(seq.seq_id)
        if state is None or state.constraint is None or not drafts:
            return drafts
        valid = state.constraint.count_valid(drafts)
        if valid < len(drafts):
            state.draft_cut = valid  # drafts[valid] was forbidden: a certain rejection
        return drafts[:valid]

    def _finish_running(self, seq: Sequence, state: RequestState, reason: str) -> None:
        if self.prefix_store is not None:
            try:
                self.prefix_store.save(seq, self.blocks, self.runner)
            except OSError as exc:
                log.warning("prefix snapshot not saved: %s", exc)
        self.scheduler.finish(seq, reason)
        self._complete(state, reason)

    def _complete(self, state: RequestState, reason: str, error: str = "") -> None:
        seq = state.seq
        self._states.pop(seq.seq_id, None)
        self._seq_of_request.pop(seq.request_id, None)
        try:
            self.runner.release(seq.seq_id)
            state.finish(reason, error, self.info, self.context_limit)
        except Exception as exc:  # the request still gets its last event
            log.exception("request %d: finishing failed", seq.request_id)
            message = error or f"request failed: {describe(exc)}"
            state.on_event(Finished("error", "", (), Stats(), message))

    def close(self) -> None:
        """Abort everything and release the runner."""
        for state in list(self._states.values()):
            self.abort(state.seq.request_id)
        close_proposer(self.scheduler.proposer)
        if self._precompile is not None:
            self._precompile.stop()
        self.runner.close()
