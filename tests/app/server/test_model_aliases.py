"""`ember serve --alias PATTERN=MODEL`: glob patterns onto served models."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ember.app.server.errors import RequestInvalid
from ember.app.server.model_aliases import ModelAlias, ModelAliases
from ember.app.server.pool import ModelPool
from ember.errors import EmberError


def _pool(*aliases: str) -> ModelPool:
    names = ["gemma3", "qwen3", "claude-local"]
    return ModelPool(lambda n: None, lambda: names, aliases=ModelAliases.parse(list(aliases)))  # type: ignore[arg-type, return-value]


def test_first_matching_pattern_wins_and_served_names_are_never_remapped() -> None:
    pool = _pool("claude-haiku-*=qwen3", "claude-*=gemma3", "gpt-?o=qwen3")
    assert pool.resolve("claude-haiku-4-5") == "qwen3"
    assert pool.resolve("claude-sonnet-4-5-20250929") == "gemma3"
    assert pool.resolve("gpt-4o") == "qwen3"
    assert pool.resolve("claude-local") == "claude-local"  # a served name is itself
    assert pool.resolve("qwen3") == "qwen3"
    with pytest.raises(RequestInvalid) as caught:
        pool.resolve("Claude-sonnet")  # case-sensitive, like the names themselves
    assert caught.value.status == 404


def test_an_alias_onto_a_model_not_served_answers_404() -> None:
    with pytest.raises(RequestInvalid):
        _pool("claude-*=missing").resolve("claude-x")


@pytest.mark.parametrize("text", ["claude-*", "=gemma3", "claude-*=", ""])
def test_malformed_alias_is_refused(text: str) -> None:
    with pytest.raises(EmberError, match="PATTERN=MODEL"):
        ModelAlias.parse(text)


def test_serve_refuses_an_alias_onto_an_unknown_model() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ember", "serve", "--alias", "claude-*=no-such-model"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode != 0
    assert "--alias claude-*=no-such-model: no model 'no-such-model'" in done.stderr
    assert "Traceback" not in done.stderr
