"""gguf_pooling: the declared sentence pooling of a GGUF's metadata, and bad values refused."""

from __future__ import annotations

import pytest

from ember.models.errors import ModelFileError
from ember.models.files.pooling import gguf_pooling


@pytest.mark.parametrize(
    ("value", "expected"), [(0, "none"), (1, "mean"), (2, "cls"), (3, "last"), (4, "rank")]
)
def test_declared_pooling(value: int, expected: str) -> None:
    meta = {"general.architecture": "bert", "bert.pooling_type": value}
    assert gguf_pooling(meta) == expected


def test_a_generative_model_declares_none() -> None:
    assert gguf_pooling({"general.architecture": "gemma3"}) is None


@pytest.mark.parametrize("value", [7, -1, True, "mean", 1.0])
def test_unknown_values_are_refused(value: object) -> None:
    meta = {"general.architecture": "bert", "bert.pooling_type": value}
    with pytest.raises(ModelFileError, match="bert.pooling_type: unknown pooling type"):
        gguf_pooling(meta)
