"""Which proposer `--draft` loads: none, lookup (n-grams of the context), self (a cheaper form of
the target), auto, or a draft model that app resolved.

Above the proposers and verify.py in the imports: it builds them, none of them imports it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ember.engine.errors import EngineError

if TYPE_CHECKING:
    from ember.engine.api import EngineOptions, ModelFiles
    from ember.engine.runners.base import Runner
    from ember.engine.scheduler import Proposer

log = logging.getLogger("ember.engine.speculative.verify")  # the name the logs had

DRAFT_CHOICES = ("none", "lookup", "self", "auto")  # anything else names a draft model
DEFAULT_DRAFT = "lookup"  # what "auto" means (docs/speculative.md has the measurements)
# Runners whose verification logits are not bit-identical to one-token decoding. llama.cpp's
# CPU kernels are not batch-invariant: on the starter model, rows of a 4+-token batch differ
# from one-token decoding by up to 1.7 in logit, and rolled-back cells are re-decoded in
# batches, so greedy output with drafts can leave plain greedy's at a near tie (measured: after
# 33 tokens of a copy task, even at k = 1). Drafting there stays available on request
# (--draft lookup), but "auto" does not turn it on.
NOT_BATCH_INVARIANT = frozenset({"llama.cpp"})


def create_proposer(
    options: EngineOptions,
    runner: Runner,
    model_name: str = "",
    draft_model: ModelFiles | None = None,
) -> Proposer | None:
    """The proposer options.draft names: none, lookup, self, auto or a draft model (which app
    resolved into draft_model)."""
    choice = (options.draft or "none").strip()
    if choice == "auto":  # lookup where verification is exact and can pay, else none
        choice = "none" if runner.info.name in NOT_BATCH_INVARIANT else DEFAULT_DRAFT
    if choice == "none":
        return None
    if choice == "lookup":
        from ember.engine.speculative.adaptive import AdaptiveDraftLength
        from ember.engine.speculative.lookup import PromptLookupProposer

        return PromptLookupProposer(adaptive=AdaptiveDraftLength(options.draft_tokens))
    if choice == "self":
        from ember.engine.speculative.self_draft import self_draft_runner

        draft_runner, label = self_draft_runner(runner, options)
        return _draft_proposer(draft_runner, options, runner, model_name, label)
    if draft_model is None:
        raise EngineError(f"--draft {choice!r}: the draft model was not resolved")
    return _load_draft_model(draft_model, options, runner, model_name)


def _load_draft_model(
    draft: ModelFiles, options: EngineOptions, target: Runner, target_name: str
) -> Proposer:
    from dataclasses import replace

    from ember.engine.runners.factory import create_runner

    draft_options = replace(options, model=draft.name, draft="none")
    draft_runner = create_runner(draft_options, draft)
    try:
        return _draft_proposer(draft_runner, options, target, target_name, draft.name)
    except Exception:
        draft_runner.close()
        raise


def _draft_proposer(
    draft_runner: Runner, options: EngineOptions, target: Runner, target_name: str, name: str
) -> Proposer:
    from ember.engine.speculative.adaptive import AdaptiveDraftLength
    from ember.engine.speculative.draft_model import DraftModelProposer, check_same_tokenizer

    check_same_tokenizer(
        target.tokenizer, draft_runner.tokenizer, target_name or options.model, name
    )
    if options.ctx < 16:
        raise EngineError(f"draft model {name}: ctx={options.ctx} is too small")
    log.info("drafting with %s (k <= %d)", name, options.draft_tokens)
    return DraftModelProposer(
        draft_runner,
        name=name,
        ctx=options.ctx,
        block_size=options.block_size,
        max_seqs=options.max_batch,
        adaptive=AdaptiveDraftLength(options.draft_tokens),
    )
