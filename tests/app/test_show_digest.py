"""`ember show`: the digest comes last (text) or not at all (--no-digest), never first."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ember.app.cli import main
from tests.fixtures.quick_gguf import write_tiny_gguf


def test_digest_last_or_skipped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_tiny_gguf(tmp_path / "tiny.gguf")
    assert main(["show", str(path)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1].startswith("sha256") and "architecture" in lines[0] + lines[1] + lines[2]
    assert main(["show", str(path), "--no-digest", "--json"]) == 0
    assert "sha256" not in json.loads(capsys.readouterr().out)
    assert main(["show", str(path), "--no-digest"]) == 0
    assert "sha256" not in capsys.readouterr().out
