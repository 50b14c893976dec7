"""`ember run --draft ... --draft-tokens K` reaches the engine (fake runner: no model file)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ember.app.cli import main
from ember.engine.api import EngineOptions
from ember.engine.speculative.lookup import PromptLookupProposer

TEXT = "copy this: the cat sat on the mat, the cat sat on the mat, the cat sat on the"


def _record(capsys: pytest.CaptureFixture[str], *flags: str) -> dict[str, object]:
    argv = ["run", "fake", TEXT, "--runner", "fake", "--raw", "--temperature", "0"]
    assert main([*argv, "--max-tokens", "30", "--json", *flags]) == 0
    record: dict[str, object] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    return record


def test_run_draft_flags(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import ember.engine.engine as engine_module

    seen: list[tuple[str, int, object]] = []
    real = engine_module.create_proposer

    def spy(options: EngineOptions, runner: Any, name: str = "", draft: Any = None) -> Any:
        proposer = real(options, runner, name, draft)
        seen.append((options.draft, options.draft_tokens, proposer))
        return proposer

    monkeypatch.setattr(engine_module, "create_proposer", spy)
    plain = _record(capsys, "--draft", "none")
    assert plain["drafted_tokens"] == 0 and seen[-1][::2] == ("none", None)
    lookup = _record(capsys, "--draft", "lookup", "--draft-tokens", "6")
    assert seen[-1][:2] == ("lookup", 6) and isinstance(seen[-1][2], PromptLookupProposer)
    assert lookup["token_ids"] == plain["token_ids"]
    default = _record(capsys)  # the settings file's draft = auto: prompt lookup
    assert seen[-1][:2] == ("auto", 4) and isinstance(seen[-1][2], PromptLookupProposer)
    assert default["token_ids"] == plain["token_ids"]


def test_run_draft_self_needs_the_torch_runner(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "fake", "hi", "--runner", "fake", "--draft", "self"]) == 1
    assert "--draft self needs the torch runner" in capsys.readouterr().err
