"""Pulls in real `ember pull` processes: SIGKILL and Ctrl-C halfway, disk full, two at once."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from ember.models.hub.fit import HEADER_PEEK_BYTES
from tests.fixtures.quick_gguf import write_tiny_gguf
from tests.models.hub.hub_server import Fault, HubServer

REPO, FILE = "org/big-GGUF", "big-Q4_0.gguf"
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    folder = tmp_path_factory.mktemp("src")
    return write_tiny_gguf(folder / "src.gguf", n_vocab=32_768).read_bytes()  # about 7 MB


@pytest.fixture
def hub(hub: HubServer, data: bytes) -> HubServer:
    """The shared hub fixture with this module's file in it."""
    hub.add_repo(REPO, {FILE: data})
    return hub


def _env(hub: HubServer) -> dict[str, str]:
    return os.environ | {
        "HF_ENDPOINT": hub.url,
        "HF_HUB_OFFLINE": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def _pull(
    hub: HubServer, *extra: str, preexec_fn: Callable[[], object] | None = None
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "ember", "pull", REPO, *extra],
        cwd=ROOT,
        env=_env(hub),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=preexec_fn,
    )


def _part(ember_home: Path) -> Path:
    return ember_home / "data" / "models" / "hub" / "org--big-GGUF" / (FILE + ".part")


def _wait_part_size(proc: subprocess.Popen[str], part: Path, size: int) -> None:
    """Wait (up to 2 minutes) until the pulling process has written `size` bytes to its .part."""
    tick = threading.Event()
    for _ in range(6000):
        assert proc.poll() is None, proc.communicate()
        if part.exists() and part.stat().st_size >= size:
            return
        tick.wait(0.02)
    raise AssertionError(f"{part} did not reach {size} bytes")


def _stall_at_half(hub: HubServer, data: bytes) -> None:
    # times=2: the fit estimate's header peek (a short Range request) takes the first turn.
    hub.set_fault(REPO, FILE, Fault(stall_after=len(data) // 2, times=2))


def test_sigkill_halfway_then_resume(hub: HubServer, data: bytes, ember_home: Path) -> None:
    _stall_at_half(hub, data)
    proc = _pull(hub)
    _wait_part_size(proc, _part(ember_home), len(data) // 2)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    hub.state.release_stall.set()
    assert _part(ember_home).stat().st_size == len(data) // 2
    out = _pull(hub).communicate(timeout=120)
    final = _part(ember_home).with_suffix("")
    assert final.read_bytes() == data, out
    served = hub.served(REPO, FILE)
    assert served <= 1.1 * len(data), f"served {served} bytes for a {len(data)}-byte file"
    assert served <= len(data) + HEADER_PEEK_BYTES


def _as_at_a_terminal() -> None:
    """Ctrl-C reaches a terminal's foreground process with SIGINT at its default; a test run
    started in the background (`.ci/run &` from a script) inherits it ignored, and Python then
    leaves it ignored: the pull would wait out its 30 s read timeout instead."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_leaves_resumable_state(hub: HubServer, data: bytes, ember_home: Path) -> None:
    _stall_at_half(hub, data)
    proc = _pull(hub, preexec_fn=_as_at_a_terminal)
    _wait_part_size(proc, _part(ember_home), len(data) // 2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    hub.state.release_stall.set()
    assert proc.returncode == 130
    assert "partial download is kept" in err and "rerun" in err
    proc = _pull(hub)
    proc.communicate(timeout=120)
    assert proc.returncode == 0
    assert _part(ember_home).with_suffix("").read_bytes() == data
    assert hub.served(REPO, FILE) <= len(data) + HEADER_PEEK_BYTES


def _limit_file_size() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of being killed
    resource.setrlimit(resource.RLIMIT_FSIZE, (3_000_000, 3_000_000))


def test_disk_full_mid_transfer(hub: HubServer, data: bytes, ember_home: Path) -> None:
    Path(ember_home / "data").mkdir(parents=True)  # registry and folders exist before the limit
    proc = _pull(hub, preexec_fn=_limit_file_size)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1
    assert "disk full while writing" in err and "rerun to resume" in err
    kept = _part(ember_home).stat().st_size
    assert 0 < kept <= 3_000_000
    assert not _part(ember_home).with_suffix("").exists()
    proc = _pull(hub)
    proc.communicate(timeout=120)
    assert proc.returncode == 0
    assert _part(ember_home).with_suffix("").read_bytes() == data


def test_two_pulls_at_once(hub: HubServer, data: bytes, ember_home: Path) -> None:
    _stall_at_half(hub, data)
    first = _pull(hub)
    _wait_part_size(first, _part(ember_home), len(data) // 2)
    second = _pull(hub)
    assert second.stderr is not None
    waiting = threading.Event()

    def watch() -> None:
        for line in second.stderr:  # type: ignore[union-attr]
            if "another pull is downloading it; waiting" in line:
                waiting.set()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    assert waiting.wait(60)
    hub.state.release_stall.set()
    assert first.wait(120) == 0 and second.wait(120) == 0
    watcher.join(10)
    assert _part(ember_home).with_suffix("").read_bytes() == data
    assert not _part(ember_home).exists()
    assert hub.served(REPO, FILE) <= len(data) + HEADER_PEEK_BYTES
