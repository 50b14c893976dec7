"""Constrained decoding (engine/constraint.py) through the real Engine on FakeRunners.

The fake model's logits are a random function of the context, so without the mask its output is
noise: every reply here parses only because the mask made it.
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np
import pytest

from ember.engine.api import ConstraintSpec, GenerationRequest, SamplingParams
from ember.engine.constraint import ConstraintCompiler
from ember.engine.errors import EngineError
from ember.engine.runners.fake import FakeRunner, FakeTokenizer
from ember.engine.speculative.adaptive import AdaptiveDraftLength
from ember.engine.speculative.draft_model import DraftModelProposer
from ember.engine.speculative.lookup import PromptLookupProposer
from ember.engine.speculative.verify import sampling_probs
from tests.engine.helpers import make_engine, prompt_ids, run
from tests.engine.speculative.spec_helpers import CopyingFakeRunner, repetitive_prompt, spec_engine

pytest.importorskip("llguidance", reason="constrained decoding needs llguidance")

SCHEMA = {
    "type": "object",
    "properties": {
        "n": {"type": "integer", "minimum": 0, "maximum": 99},
        "color": {"enum": ["red", "green", "blue"]},
        "ok": {"type": "boolean"},
    },
    "required": ["n", "color", "ok"],
    "additionalProperties": False,
}


def _request(spec: ConstraintSpec, seed: int = 0, temperature: float = 1.0, **kw: object):
    sampling = SamplingParams(temperature=temperature, seed=seed, max_tokens=200, **kw)  # type: ignore[arg-type]
    return GenerationRequest(prompt_ids=prompt_ids(6), sampling=sampling, constraint=spec)


@pytest.mark.parametrize("seed", range(5))
def test_json_schema_reply_parses_matches_and_ends_itself(seed: int) -> None:
    import jsonschema

    engine = make_engine()
    final = run(engine, _request(ConstraintSpec("json_schema", json.dumps(SCHEMA)), seed))
    assert final.reason == "stop"  # the grammar completed: no EOS, no max_tokens
    jsonschema.validate(json.loads(final.text), SCHEMA)


def test_any_json_object() -> None:
    engine = make_engine()
    final = run(engine, _request(ConstraintSpec("json_object"), seed=3))
    assert final.reason == "stop"
    assert isinstance(json.loads(final.text), dict)


@pytest.mark.parametrize(
    ("spec", "pattern"),
    [
        (ConstraintSpec("regex", r"[0-9]{3}-[a-z]{2,4}"), r"[0-9]{3}-[a-z]{2,4}"),
        (ConstraintSpec("gbnf", 'root ::= "yes" | "no" | "maybe"'), r"yes|no|maybe"),
        (ConstraintSpec("lark", 'start: "id=" /[A-F]{4}/ ";"'), r"id=[A-F]{4};"),
    ],
)
def test_regex_gbnf_and_lark(spec: ConstraintSpec, pattern: str) -> None:
    engine = make_engine()
    for seed in range(3):
        final = run(engine, _request(spec, seed))
        assert re.fullmatch(pattern, final.text), final.text


def test_lark_with_inline_json_schema() -> None:
    inline = {**SCHEMA, "x-guidance": {"whitespace_flexible": False}}
    grammar = f'start: "<call>" %json {json.dumps(inline)} "</call>"'
    final = run(make_engine(), _request(ConstraintSpec("lark", grammar), seed=4))
    match = re.fullmatch(r"<call>(.*)</call>", final.text)
    assert match and set(json.loads(match.group(1))) == {"n", "color", "ok"}


def test_grammars_compile_once_per_spec() -> None:
    compiler = ConstraintCompiler(FakeTokenizer(), FakeTokenizer.vocab_size)
    built: list[ConstraintSpec] = []
    build = compiler._build

    def counted(spec: ConstraintSpec) -> Any:
        built.append(spec)
        return build(spec)

    compiler._build = counted  # type: ignore[method-assign]
    spec = ConstraintSpec("regex", "a+")
    first, second = compiler.compile(spec), compiler.compile(ConstraintSpec("regex", "a+"))
    assert built == [spec]
    first.advance(FakeTokenizer().encode("a")[0])  # requests get their own state
    assert second.count_valid(FakeTokenizer().encode("aa")) == 2 and not second.accepting
    assert first.accepting


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        (ConstraintSpec("json_schema", "{not json"), "not valid JSON"),
        (ConstraintSpec("json_schema", "[1, 2]"), "must be a JSON object"),
        (ConstraintSpec("lark", "start: ((("), "constraint lark"),
        (ConstraintSpec("gbnf", "root ::= ("), "constraint gbnf"),
        (ConstraintSpec("regex", "(unclosed"), "constraint regex"),
    ],
)
def test_bad_grammars_are_one_line_errors(spec: ConstraintSpec, needle: str) -> None:
    engine = make_engine()
    with pytest.raises(EngineError, match=re.escape(needle)) as info:
        engine.add_request(_request(spec), lambda event: None)
    assert "\n" not in str(info.value)
    assert not engine.has_work  # nothing was queued


def test_spec_is_validated_at_construction() -> None:
    with pytest.raises(EngineError, match="kind"):
        ConstraintSpec("xml", "x")  # type: ignore[arg-type]
    with pytest.raises(EngineError, match="empty"):
        ConstraintSpec("regex", " ")


def test_lookup_drafts_are_checked_and_greedy_output_is_unchanged() -> None:
    # The copying model wants to repeat its prompt; the grammar allows only part of it, so
    # some drafts are cut as forbidden and the rest verified: output == plain constrained greedy.
    spec = ConstraintSpec("regex", r"[\x04-\x60]{1,40}")
    prompt = repetitive_prompt(60)
    outputs = []
    drafted = 0
    for proposer in (None, PromptLookupProposer(adaptive=AdaptiveDraftLength(4))):
        engine = spec_engine(CopyingFakeRunner(seed=1), proposer, draft_tokens=4)
        sampling = SamplingParams(temperature=0.0, max_tokens=40, ignore_eos=True)
        final = run(
            engine, GenerationRequest(prompt_ids=prompt, sampling=sampling, constraint=spec)
        )
        outputs.append(final.token_ids)
        drafted += final.stats.drafted_tokens
    assert outputs[0] == outputs[1] and len(outputs[0]) > 10
    assert drafted > 0


def test_sampled_drafts_under_a_mask_keep_the_masked_target_law() -> None:
    """First two tokens through the engine with an unconstrained sampled draft model: their
    joint law is the masked target's (chi-square at 0.999). Forbidden drafts are cut before the
    forward and their position is a certain rejection (the residual draw)."""
    allowed = list(range(4 + 64, 4 + 128))  # bytes 64..127 as tokens

    class LeaningDraft(FakeRunner):  # drafts inside the allowed set often, not always
        def forward(self, batch):
            rows = super().forward(batch)
            for row in rows:
                row[:, allowed] += 9.0
            return rows

    target = FakeRunner(seed=0, dim=8)
    draft = DraftModelProposer(LeaningDraft(seed=5, dim=8), block_size=4)
    engine = spec_engine(target, draft, draft_tokens=2)
    cuts: list[int] = []
    keep = engine.scheduler.draft_filter
    assert keep is not None

    def counting(seq, drafts):
        kept = keep(seq, drafts)
        cuts.append(len(drafts) - len(kept))
        return kept

    engine.scheduler.draft_filter = counting
    tokenizer = target.tokenizer
    spec = ConstraintSpec("regex", r"[\x40-\x7f]{2}")
    prompt = list(prompt_ids(5))
    params = SamplingParams(temperature=1.5, top_k=3, max_tokens=2, ignore_eos=True)

    def masked(context: list[int]) -> np.ndarray:
        logits = np.full(target.info.vocab_size, -np.inf, dtype=np.float32)
        full = target.reference_logits(context)
        logits[allowed] = full[allowed]
        return sampling_probs(logits, params)

    first = masked(prompt)
    law = {
        (int(x), int(y)): first[x] * p
        for x in np.flatnonzero(first)
        for y, p in enumerate(masked([*prompt, int(x)]))
        if p > 0
    }
    trials = 600
    counts: dict[tuple[int, int], int] = {}
    drafted = 0
    for seed in range(trials):
        sampling = SamplingParams(**{**params.__dict__, "seed": seed})
        request = GenerationRequest(prompt_ids=tuple(prompt), sampling=sampling, constraint=spec)
        final = run(engine, request)
        pair = (final.token_ids[0], final.token_ids[1])
        assert pair in law, f"{tokenizer.decode(list(pair))!r} is outside the masked target"
        counts[pair] = counts.get(pair, 0) + 1
        drafted += final.stats.drafted_tokens
    stat = sum((counts.get(c, 0) - p * trials) ** 2 / (p * trials) for c, p in law.items())
    # 9 cells (top-3 of the masked rows twice): 8 degrees of freedom, 0.999 quantile 26.1
    assert len(law) == 9 and stat < 26.1, (stat, counts)
    assert drafted > 0 and sum(cuts) > 0, (drafted, cuts[:40])  # both paths ran
