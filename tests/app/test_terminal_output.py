"""Nothing from outside reaches the terminal raw: metadata, file names and typed names escaped."""

from __future__ import annotations

import io
import threading
from pathlib import Path

import pytest

from ember.app.cli import main
from tests.fixtures.quick_gguf import write_tiny_gguf
from tests.models.files.badfiles.layout import build, kv_str, spec_from_file

EVIL = "tiny\x1b[2J\x1b[31m\nember: error: pwned\r\u202etxt.exe\x07"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def _inert(text: str) -> None:
    for char in ("\x1b", "\r", "\x07", "\u202e"):
        assert char not in text
    assert not any(line.startswith("ember: error: pwned") for line in text.splitlines())


def _evil_gguf(path: Path) -> Path:
    spec = spec_from_file(write_tiny_gguf(path.with_name("plain.gguf")))
    spec.set_kv("general.name", kv_str("general.name", EVIL))
    path.write_bytes(build(spec)[0])
    return path


def test_show_escapes_gguf_metadata(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "show", str(_evil_gguf(tmp_path / "m.gguf")))
    assert code == 0
    _inert(out)
    assert "tiny\\x1b[2J\\x1b[31m\\nember: error: pwned\\r\\u202etxt.exe\\x07" in out
    assert all(line[:1].isalpha() for line in out.splitlines())  # every line starts with a label


def test_add_and_list_never_print_control_characters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    evil_file = tmp_path / "evil\x1b[31m\nember: error: pwned.gguf"
    write_tiny_gguf(evil_file)
    code, out, err = _run(capsys, "add", str(evil_file))
    assert code == 1 and out == ""
    assert len(err.splitlines()) == 1 and "must not contain control characters" in err
    _inert(err)
    code, _, err = _run(capsys, "add", str(evil_file), "--name", "two\nlines")
    assert code == 1 and len(err.splitlines()) == 1 and "control characters" in err
    code, out, err = _run(capsys, "add", str(evil_file), "--name", "fine")
    assert code == 0 and len(out.splitlines()) == 1
    _inert(out)
    code, out, _ = _run(capsys, "list")
    assert code == 0 and any(line.startswith("fine ") for line in out.splitlines())
    _inert(out)
    code, _, err = _run(capsys, "alias", "x\x1b", "fine")
    assert code == 1 and "control characters" in err
    _inert(err)


def test_errors_are_one_escaped_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "show", str(tmp_path / "nope\nember: error: pwned\x1b[0m"))
    assert code == 1 and len(err.splitlines()) == 1
    _inert(err)


def test_show_prints_everything_before_hashing_a_large_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the hash is held below, as a many-GiB file's would take minutes (bytes past the last
    # tensor are refused at the header check now, so the file itself stays a valid tiny one)
    path = write_tiny_gguf(tmp_path / "big.gguf")
    hashing = threading.Event()
    release = threading.Event()
    import ember.models.registry.registry as registry_module

    real = registry_module.sha256_file

    def slow_sha256(file: Path) -> str:
        hashing.set()
        assert release.wait(timeout=60)
        return "0" * 64 if file == path else real(file)

    monkeypatch.setattr(registry_module, "sha256_file", slow_sha256)
    out = io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    codes: list[int] = []
    worker = threading.Thread(target=lambda: codes.append(main(["show", str(path)])))
    worker.start()
    try:
        assert hashing.wait(timeout=60)
        printed = out.getvalue()  # while the hash is still running
        assert "architecture" in printed and "file size" in printed and "path" in printed
        assert printed.splitlines()[-1].startswith("sha256")
    finally:
        release.set()
        worker.join(timeout=60)
    assert codes == [0] and out.getvalue().rstrip().endswith("0" * 64)
