"""System tools some tests drive (tmux, ruby, systemd-analyze, hadolint, pipx).

A test that needs one is marked `@pytest.mark.requires_tool("ruby", "apt-get install ruby")`.
On a bare machine it is skipped with that reason, so the README's test command stays honest;
with EMBER_REQUIRE_TOOLS=1 (set by .ci/run, which installs them) a missing tool fails the test
instead, so CI can never pass by skipping.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

REQUIRE_ENV = "EMBER_REQUIRE_TOOLS"


def find_tool(name: str) -> str | None:
    """The tool on PATH, or beside this interpreter (pip-installed ones such as hadolint)."""
    return shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))


def check_required_tools(item: pytest.Item) -> None:
    """Skip (or, under EMBER_REQUIRE_TOOLS=1, fail) a test whose tools are missing."""
    for mark in item.iter_markers("requires_tool"):
        name = str(mark.args[0])
        hint = str(mark.args[1]) if len(mark.args) > 1 else f"install {name}"
        if find_tool(name) is not None:
            continue
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"needs {name}, which is missing although {REQUIRE_ENV}=1 ({hint})")
        pytest.skip(f"needs {name} ({hint})")


def tool(name: str) -> str:
    """Path of a tool the running test is marked as requiring."""
    found = find_tool(name)
    if found is None:  # only when the test forgot its requires_tool mark
        pytest.fail(f"{name} is not installed; mark the test @pytest.mark.requires_tool({name!r})")
    return found
