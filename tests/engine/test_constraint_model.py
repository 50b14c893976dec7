"""Constrained decoding on the real starter model, both runners (the engine masks for both)."""

from __future__ import annotations

import functools
import importlib.util
import json

import pytest

from ember.engine.api import (
    ChatMessage,
    ConstraintSpec,
    EngineOptions,
    Finished,
    GenerationRequest,
    ModelFiles,
    SamplingParams,
)
from ember.engine.engine import Engine

pytestmark = pytest.mark.model
pytest.importorskip("llguidance", reason="constrained decoding needs llguidance")

HAS_TORCH = importlib.util.find_spec("torch") is not None
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 40},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "pets": {"type": "array", "items": {"enum": ["cat", "dog", "fish"]}, "maxItems": 3},
    },
    "required": ["name", "age", "pets"],
    "additionalProperties": False,
}


@functools.cache
def _reply(model: ModelFiles, runner: str, draft: str = "none") -> Finished:
    """The constrained greedy reply (deterministic: computed once per module run, so the plain
    torch reply serves both its own check and the drafted comparison)."""
    options = EngineOptions(
        model=model.name, runner=runner, threads=2, ctx=512, draft=draft, prefix_disk_bytes=0
    )
    engine = Engine.load(options, model)
    try:
        request = GenerationRequest(
            messages=(ChatMessage("user", "Describe a person as JSON."),),
            sampling=SamplingParams(temperature=0.0, max_tokens=80),
            constraint=ConstraintSpec("json_schema", json.dumps(SCHEMA)),
        )
        final = list(engine.generate(request))[-1]
        assert isinstance(final, Finished)
        return final
    finally:
        engine.close()


@pytest.mark.parametrize(
    "runner",
    [
        "llama.cpp",
        pytest.param("torch", marks=pytest.mark.skipif(not HAS_TORCH, reason="no torch")),
    ],
)
def test_json_schema_reply_on_both_runners(starter_files: ModelFiles, runner: str) -> None:
    import jsonschema

    final = _reply(starter_files, runner)
    assert final.reason == "stop", final.text  # the grammar ended it
    jsonschema.validate(json.loads(final.text), SCHEMA)


@pytest.mark.skipif(not HAS_TORCH, reason="no torch")
def test_lookup_drafts_under_a_constraint_keep_greedy_output(starter_files: ModelFiles) -> None:
    plain = _reply(starter_files, "torch")
    drafted = _reply(starter_files, "torch", draft="lookup")
    assert drafted.token_ids == plain.token_ids
