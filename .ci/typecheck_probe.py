"""Deliberately wrong cross-package calls that .ci/typecheck must report (never imported or run).

Each marked line names the error mypy has to find there. If it finds none, `ember.*` resolved to
`Any` again (the package-dir mapping was lost) and .ci/typecheck fails. The calls go across the
folders the mapping joins: models/ (registry), engine/ (api), and a method of a class.
"""

from __future__ import annotations

from ember.engine.api import GenerationRequest, SamplingParams
from ember.models.registry import registry
from ember.models.registry.registry import Registry


def module_function_that_does_not_exist() -> None:
    registry.list_models()  # expect: [attr-defined]


def wrong_type_to_an_engine_api() -> None:
    SamplingParams(temperature="hot")  # expect: [arg-type]


def wrong_field_type() -> GenerationRequest:
    return GenerationRequest(prompt=["not", "a", "string"])  # expect: [arg-type]


def method_result_used_wrongly(store: Registry) -> int:
    return store.resolve("gemma3-270m")  # expect: [return-value]
