from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ember.app.cli import main
from tests.models.tiny_gguf import write_tiny_gguf, write_tiny_safetensors


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_show_gguf_path_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_tiny_gguf(tmp_path / "tiny.gguf")
    code, out, _ = _run(capsys, "show", str(path), "--json")
    assert code == 0
    info = json.loads(out)
    assert info["format"] == "gguf" and info["architecture"] == "llama"
    assert info["context_length"] == 128
    assert info["size_bytes"] == path.stat().st_size
    import hashlib

    assert info["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert info["path"] == str(path.resolve())


def test_show_text_and_unknown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = write_tiny_safetensors(tmp_path / "st")
    code, out, _ = _run(capsys, "show", str(folder))
    assert code == 0
    assert "architecture" in out and "llama" in out and "sha256" in out
    code, _, err = _run(capsys, "show", "missing-model")
    assert code == 1
    assert "missing-model" in err and "ember pull" in err


def test_list_empty_then_added(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("ember.models.starter.starter_installed", lambda: False)
    code, out, _ = _run(capsys, "list")
    assert code == 0 and "No local models" in out
    from ember.models.registry import Registry

    Registry().add_path(write_tiny_gguf(tmp_path / "a.gguf"))
    code, out, _ = _run(capsys, "list", "--json")
    rows = json.loads(out)
    assert [r["name"] for r in rows] == ["a"] and rows[0]["present"] is True
    code, out, _ = _run(capsys, "list")
    assert out.splitlines()[0].split()[:3] == ["NAME", "FORMAT", "ARCH"]
    assert out.splitlines()[1].startswith("a ")


@pytest.mark.model
def test_show_starter_offline(ember_home: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "ember", "show", "gemma3-270m", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    assert info["architecture"] == "gemma3"
    assert info["context_length"] == 32768
    assert info["size_bytes"] == 253113024
    assert info["sha256"] == "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
    assert Path(info["path"]).is_relative_to(ember_home)
