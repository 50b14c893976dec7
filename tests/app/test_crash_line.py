"""Every command ends in one line on an unexpected exception (a bug, or a file no validator caught
yet), exits 1, and keeps the traceback in the log: never a wall of Python internals."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from ember.app.cli import main
from ember.app.commands import list as list_command
from ember.app.crash import log_path


def test_a_bug_in_a_command_is_one_line_exit_1_and_the_traceback_is_logged(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(args: Any) -> int:
        raise RuntimeError("boom\nsecond line \x1b[2J")

    monkeypatch.setattr(list_command, "run", broken)
    code = main(["list"])
    err = capsys.readouterr().err
    log = log_path()
    assert code == 1
    assert err == (
        "ember: error: ember list stopped on RuntimeError: boom second line \\x1b[2J"
        f" (details in {log})\n"
    )
    kept = log.read_text()
    assert "--- ember list" in kept and "Traceback" in kept and "boom" in kept


def test_an_unwritable_log_is_named_in_the_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(args: Any) -> int:
        raise ValueError("bad")

    monkeypatch.setattr(list_command, "run", broken)
    log_path().parent.mkdir(parents=True, exist_ok=True)
    log_path().mkdir()  # a folder where the log file belongs: the write fails
    assert main(["list"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ember: error: ember list stopped on ValueError: bad (the traceback")
    assert err.count("\n") == 1


def test_run_on_a_config_of_the_wrong_type_is_one_line(
    tmp_path: Path, tiny_models: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("torch")
    folder = tmp_path / "bad-config"
    shutil.copytree(tiny_models.hf_dir("llama"), folder)
    config = json.loads((folder / "config.json").read_text())
    config["rms_norm_eps"] = {"a": 1}  # a dict where a float belongs
    (folder / "config.json").write_text(json.dumps(config))
    code = main(["run", str(folder), "hi", "--max-tokens", "2", "--runner", "torch"])
    err = capsys.readouterr().err
    assert code == 1
    assert err.count("\n") == 1 and err.startswith("ember: error: "), err
    # the typed metadata read (models/files/hparams) names the field in that one line
    assert "Traceback" not in err and "config.json: rms_norm_eps: must be a number" in err, err
