"""The README's test command on a bare machine: tool-driven tests skip with their reason, and
.ci/run (EMBER_REQUIRE_TOOLS=1) turns such a skip into a failure."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUBY_TEST = "tests/packaging/test_packaging.py::test_homebrew_formula_is_valid_ruby"


def _pytest(require: bool) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PATH=str(Path(sys.executable).parent))  # no ruby on this PATH
    env.pop("EMBER_REQUIRE_TOOLS", None)
    if require:
        env["EMBER_REQUIRE_TOOLS"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", RUBY_TEST],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_missing_tool_is_a_skip_with_its_reason() -> None:
    proc = _pytest(require=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 skipped" in proc.stdout and "needs ruby (apt-get install ruby)" in proc.stdout


def test_ci_makes_a_missing_tool_a_failure() -> None:
    proc = _pytest(require=True)
    assert proc.returncode == 1
    assert "needs ruby, which is missing although EMBER_REQUIRE_TOOLS=1" in proc.stdout
