"""The packaging tests' shared wheel (built once per run)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _clean_copy(dest: Path) -> Path:
    """The checkout's files as a clean clone (plus local edits) would have them.

    setuptools builds in place and reuses build/lib, so a wheel built from a used checkout
    still ships modules deleted since the last build; a copy without ignored files cannot.
    """
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():  # a file deleted but not yet committed is still listed
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = _clean_copy(tmp_path_factory.mktemp("source"))
    out_dir = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(out_dir),
            str(source),
        ],
        check=True,
        timeout=300,
    )
    return next(out_dir.glob("ember-*.whl"))
