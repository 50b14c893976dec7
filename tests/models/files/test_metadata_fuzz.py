"""Any value in any metadata field: a valid description or one clean ModelFileError, nothing else.

Property-based (hypothesis, derandomized so the default run is deterministic): config.json values
of every JSON type (huge integers, NaN, nested objects where numbers belong...), GGUF metadata of
every GGUF type, tokenizer_config.json fields, and whole folders through open_safetensors.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ember.models.errors import ModelFileError
from ember.models.files.hparams.from_gguf import from_gguf
from ember.models.files.hparams.from_hf import from_hf_config
from ember.models.files.hparams.hparams import (
    ModelHParams,
)
from ember.models.files.safetensors import open_safetensors
from ember.models.files.tokenizer_config import read_tokenizer_config
from tests.fixtures.quick_hf import write_tiny_hf
from tests.models.files.metadata_strategies import JSON_VALUES, config_edits, gguf_edits

FUZZ = settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _clean(exc: ModelFileError, source: str) -> None:
    """One line that starts with the file (or its folder, then the file) and says why."""
    message = str(exc)
    assert message.startswith((f"{source}: ", f"{source}/")) and "\n" not in message, message
    assert len(message) < 400, message


@FUZZ
@given(config=config_edits())
def test_config_values_give_hparams_or_a_clean_error(config: dict[str, Any]) -> None:
    try:
        hp = from_hf_config(config, "m/config.json")
    except ModelFileError as exc:
        _clean(exc, "m/config.json")
        return
    assert isinstance(hp, ModelHParams)
    hp.to_dict()  # every derived value is computable
    assert hp.attn_scale > 0 and [hp.layer_rope_theta(i) for i in range(hp.n_layers)]


@FUZZ
@given(metadata=gguf_edits(), n_tokens=st.none() | st.integers(1, 300))
def test_gguf_values_give_hparams_or_a_clean_error(
    metadata: dict[str, Any], n_tokens: int | None
) -> None:
    shapes: dict[str, tuple[int, ...]] = {"token_embd.weight": (100, 64)}
    try:
        hp = from_gguf(metadata, n_tokens, shapes, "m.gguf")
    except ModelFileError as exc:
        _clean(exc, "m.gguf")
        return
    assert isinstance(hp, ModelHParams) and hp.attn_scale > 0


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_hf(tmp_path_factory.mktemp("fuzz") / "m", "gemma3")


TOKENIZER_KEYS = ["bos_token", "eos_token", "add_bos_token", "add_eos_token", "chat_template"]


@FUZZ
@given(
    edits=st.dictionaries(st.sampled_from(TOKENIZER_KEYS), JSON_VALUES, min_size=1),
    top=st.sampled_from(["object", "list", "number"]),
)
def test_tokenizer_config_values(edits: dict[str, Any], top: str, folder: Path) -> None:
    doc: Any = {"object": edits, "list": [edits], "number": 3}[top]
    (folder / "tokenizer_config.json").write_text(json.dumps(doc))
    try:
        config = read_tokenizer_config(folder)
    except ModelFileError as exc:
        _clean(exc, "m/tokenizer_config.json")
        return
    for value in (config.bos_token, config.eos_token, config.chat_template):
        assert value is None or isinstance(value, str)


@settings(FUZZ, max_examples=60)
@given(config=config_edits())
def test_whole_folder_opens_or_fails_cleanly(config: dict[str, Any], folder: Path) -> None:
    (folder / "tokenizer_config.json").write_text('{"bos_token": "<s>"}')
    (folder / "config.json").write_text(json.dumps(config))
    try:
        assert isinstance(open_safetensors(folder).supported, bool)
    except ModelFileError as exc:
        _clean(exc, "m")
