"""Building the native kernels: no compiler or a failing one is a one-line notice and torch's
kernels (never a crash); concurrent builds compile once; nothing is written beside the sources."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from ember.engine.errors import EngineError
from ember.engine.runners.torch.native import compile as native_compile
from ember.engine.runners.torch.native import kernels as native_kernels
from ember.engine.runners.torch.runner import TorchOptions, TorchRunner

from ..helpers import greedy

FAKE_CC = """#!{python}
import sys, time
from pathlib import Path
args = sys.argv[1:]
if args == ["--version"]:
    print("fake-cc 1.0")
    sys.exit(0)
with open({log!r}, "a") as f:
    f.write("build\\n")
if {fail}:
    sys.exit("fake-cc: error: this compiler is broken")
time.sleep(1.0)
Path(args[args.index("-o") + 1]).write_bytes(b"not a library")
"""


def _fake_cc(tmp_path: Path, fail: bool) -> tuple[Path, Path]:
    """An executable standing in for a C compiler, and the file counting its builds."""
    log = tmp_path / "builds.txt"
    cc = tmp_path / "fake-cc"
    cc.write_text(FAKE_CC.format(python=sys.executable, log=str(log), fail=fail))
    cc.chmod(0o755)
    return cc, log


@pytest.fixture
def no_compiler(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine without gcc, cc or clang: an empty PATH and no CC; no library loaded yet."""
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.delenv("EMBER_NATIVE", raising=False)
    monkeypatch.setenv("PATH", "")
    monkeypatch.setattr(native_kernels, "_loaded", {})


def test_no_compiler_is_a_reason_not_an_error(no_compiler: None, tmp_path: Path) -> None:
    build = native_compile.load_library(tmp_path)
    assert build.lib is None and build.reason == "no C compiler (gcc, cc or clang) found"
    assert list(tmp_path.iterdir()) == []


def test_runner_without_compiler_uses_torch_kernels_with_one_notice(
    no_compiler: None, tiny_models: Any, caplog: pytest.LogCaptureFixture
) -> None:
    path = tiny_models.gguf("llama", "Q4_0")
    with caplog.at_level(logging.WARNING):
        runner = TorchRunner.load(path, TorchOptions(device="cpu"))
    notices = [r.getMessage() for r in caplog.records if "native CPU kernels" in r.getMessage()]
    assert notices == [
        "torch runner: native CPU kernels unavailable (no C compiler (gcc, cc or clang) found); "
        "using torch's kernels (slower, see README: ember bench)"
    ]
    assert runner.native is None
    reference = TorchRunner.load(path, TorchOptions(device="cpu", kernels="torch"))
    prompt = [1, 5, 9, 13]
    assert greedy(runner, prompt, 8, 4, 8) == greedy(reference, prompt, 8, 4, 8)
    with pytest.raises(EngineError, match="kernels native: no C compiler"):
        TorchRunner.load(path, TorchOptions(device="cpu", kernels="native"))


def test_failing_compiler_is_a_reason_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cc, log = _fake_cc(tmp_path, fail=True)
    monkeypatch.setenv("CC", str(cc))
    out = tmp_path / "cache"
    build = native_compile.load_library(out)
    assert build.lib is None
    assert build.reason.startswith("could not compile the native kernels (")
    assert "this compiler is broken" in build.reason
    assert [p.suffix for p in out.iterdir()] == [".lock"]  # no library, no partial file
    assert log.read_text() == "build\n"


def test_concurrent_builds_compile_once_outside_the_sources(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two processes starting on an empty cache: one compiles, the other waits for its file."""
    cc, log = _fake_cc(tmp_path, fail=False)
    sources = sorted(p.name for p in native_compile.CSRC.parent.rglob("*"))
    out = tmp_path / "cache"
    code = textwrap.dedent(
        f"""
        from pathlib import Path
        from ember.engine.runners.torch.native.compile import _built
        from ember.engine.runners.torch.native.isa import choose
        path, problem = _built({str(cc)!r}, Path({str(out)!r}), choose("portable"))
        assert problem == "", problem
        print(path.read_bytes().decode())
        """
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=120)[0].strip() for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    assert outputs == ["not a library"] * 2
    assert log.read_text() == "build\n"
    assert sorted(p.suffix for p in out.iterdir()) == [".lock", ".so"]
    assert sorted(p.name for p in native_compile.CSRC.parent.rglob("*")) == sources


def test_shared_temp_folder_of_another_user_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a cache folder the library goes to a private per-user temp folder; one that
    others can write (it could hold a planted library) is refused."""
    monkeypatch.setattr(native_compile.tempfile, "tempdir", str(tmp_path))
    root, problem = native_compile._private_temp_dir()
    assert problem == "" and root.parent == tmp_path and root.stat().st_mode & 0o777 == 0o700
    root.chmod(0o777)
    _, problem = native_compile._private_temp_dir()
    assert problem == f"{root}: not a private folder of this user"
