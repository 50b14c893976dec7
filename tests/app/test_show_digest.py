"""`ember show`: the digest comes last (text) or not at all (--no-digest), never first."""

from __future__ import annotations

import json
import os
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


def test_a_huge_sparse_file_with_a_garbage_tail_is_refused_fast(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 25: a 64 GiB sparse GGUF whose tail is garbage; the header check read (hashed)
    all of it, for minutes. The bytes past the last tensor are refused from the header."""
    import time

    path = write_tiny_gguf(tmp_path / "huge.gguf")
    model_end = path.stat().st_size
    with path.open("r+b") as f:  # sparse: no disk used for the hole
        f.seek(64 * 1024**3 - 8)
        f.write(b"garbage!")
    start = time.monotonic()
    assert main(["show", str(path)]) != 0
    assert time.monotonic() - start < 20.0
    err = capsys.readouterr().err
    tail = 64 * 1024**3 - model_end
    assert f"{tail:,} bytes after the last tensor (which ends at byte {model_end:,})" in err
    assert err.count("\n") == 1


def _fifo(folder: Path) -> Path:
    os.mkfifo(folder / "pipe.gguf")
    return folder / "pipe.gguf"


def _link_to_zero(folder: Path) -> Path:
    (folder / "z.gguf").symlink_to("/dev/zero")
    return folder / "z.gguf"


@pytest.mark.parametrize(
    ("make", "reason"),
    [(_fifo, "a FIFO (named pipe)"), (_link_to_zero, "a character device")],
)
def test_model_paths_that_are_not_regular_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make, reason: str
) -> None:
    path = make(tmp_path)
    assert main(["show", str(path)]) != 0
    err = capsys.readouterr().err
    assert f"{path} (model): {reason}, not a regular file" in err and err.count("\n") == 1
