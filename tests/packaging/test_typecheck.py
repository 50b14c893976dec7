""".ci/typecheck: its tree is the installed layout, and a probe it cannot see fails the check."""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
import tomllib
import zipfile
from pathlib import Path
from types import ModuleType

from tests.packaging.conftest import ROOT


@functools.cache
def _typecheck() -> ModuleType:
    """The script as a module (it lives in .ci/, outside every package)."""
    spec = importlib.util.spec_from_file_location("ci_typecheck", ROOT / ".ci" / "typecheck.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while being built
    spec.loader.exec_module(module)
    return module


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_tree_holds_exactly_the_wheels_python_files(wheel: Path, tmp_path: Path) -> None:
    tc = _typecheck()
    tc.build_tree(tc.tree_links(_pyproject()), base=tmp_path)
    tree = tmp_path / tc.TREE
    in_tree = set()
    for folder, dirs, files in os.walk(tree / "ember", followlinks=True):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        rel = Path(folder).relative_to(tree)
        in_tree |= {(rel / f).as_posix() for f in files if f.endswith(".py")}
    in_wheel = {n for n in zipfile.ZipFile(wheel).namelist() if n.endswith(".py")}
    assert "ember/engine/api.py" in in_tree and "ember/errors.py" in in_tree
    # a .py file the wheel lacks would be checked but never installed (a package missing from
    # pyproject's packages list), and one the tree lacks would never be checked
    assert in_tree == in_wheel
    for name in ("tests", "benchmarks"):
        assert (tree / name).resolve() == ROOT / name
    assert (tree / tc.PROBE_MODULE).resolve() == ROOT / tc.PROBE


def test_reported_paths_map_back_to_the_real_files() -> None:
    tc = _typecheck()
    links = tc.tree_links(_pyproject())
    out = tc.to_real(
        "build/typecheck/ember/app/commands/serve.py:42: error: boom  [attr-defined]\n"
        "build/typecheck/ember/errors.py:3: note: here\n"
        "build/typecheck/tests/tui/test_chat.py:9: error: x  [misc]\n",
        links,
    )
    assert out.splitlines() == [
        "app/commands/serve.py:42: error: boom  [attr-defined]",
        "ember/errors.py:3: note: here",
        "tests/tui/test_chat.py:9: error: x  [misc]",
    ]


def test_probe_lines_missing_from_the_report_fail() -> None:
    tc = _typecheck()
    expected = tc.expectations(ROOT / tc.PROBE)
    assert len(expected) >= 3 and "attr-defined" in expected.values()
    probe = str(tc.PROBE)
    report = [f"{probe}:{n}: error: reported  [{code}]" for n, code in expected.items()]
    report += [f"{probe}:{n}: note: context" for n in expected]
    report += ["app/cli.py:1: error: elsewhere  [misc]"]
    rest, found = tc.split_probe(report, probe)
    assert rest == ["app/cli.py:1: error: elsewhere  [misc]"]
    assert tc.probe_failures(expected, found) == []
    # ember.* resolving to Any again: mypy reports nothing at the probe
    failures = tc.probe_failures(expected, [])
    assert len(failures) == len(expected) and all("did not report" in f for f in failures)
    # a probe line failing for another reason (e.g. a renamed module) is not a pass either
    line = min(expected)
    wrong = [(n, "import-not-found" if n == line else c) for n, c in expected.items()]
    assert tc.probe_failures(expected, wrong) == [
        f"{tc.PROBE}:{line}: mypy did not report [{expected[line]}] here; "
        "ember.* may resolve to Any again",
        f"{tc.PROBE}:{line}: unexpected error [import-not-found] (only the marked lines may fail)",
    ]
