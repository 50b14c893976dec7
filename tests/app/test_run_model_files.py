"""`ember run` and `--draft` refuse hostile model folders with `ember show`'s one line (exit 1),
never a traceback: every loader goes through models/files' checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from ember.app.cli import main
from tests.fixtures.quick_hf import write_tiny_hf
from tests.models.files.badfiles.hostile_hf import HOSTILE, write_hostile

CASES = sorted(HOSTILE)


def _fails_in_one_line(capsys: pytest.CaptureFixture[str], argv: list[str], fragment: str) -> None:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    assert err.startswith("ember: error: ") and fragment in err and "Traceback" not in err, err


@pytest.mark.parametrize("case", CASES)
def test_show_and_run_refuse_alike(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = str(write_hostile(tmp_path / "m", case))
    fragment = HOSTILE[case][1]
    _fails_in_one_line(capsys, ["show", folder], fragment)
    _fails_in_one_line(capsys, ["run", folder, "hi", "--runner", "torch", "--raw"], fragment)


@pytest.mark.parametrize("case", ["torch_zip_as_safetensors", "nested_200k_deep", "nan"])
def test_draft_model_is_checked_too(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = str(write_tiny_hf(tmp_path / "target", "llama", legacy_config=True))
    draft = str(write_hostile(tmp_path / "m", case))
    argv = [
        "run",
        target,
        "hi",
        "--runner",
        "torch",
        "--raw",
        "--draft",
        draft,
        "--max-tokens",
        "2",
    ]
    _fails_in_one_line(capsys, argv, HOSTILE[case][1])
