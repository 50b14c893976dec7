"""Every transport or answer failure of the Hub is one DownloadError; nothing half-made stays.

Faults are injected into the real local Hub stand-in (hub_server.py); each pull must end in a
one-line error naming what went wrong, with no model registered and no file under its final name.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ember.app.loading import open_registry
from ember.models.errors import DownloadError
from ember.models.hub.plan import repo_folder
from ember.models.hub.pull import Puller
from tests.fixtures.quick_gguf import write_tiny_gguf
from tests.fixtures.quick_hf import write_tiny_hf
from tests.models.hub.hub_server import Fault, HubServer

REPO, FILE = "org/t-GGUF", "t-Q4_K_M.gguf"
PORTAL = ("text/html; charset=utf-8", b"<html><form>Log in to the cafe Wi-Fi</form></html>")


@pytest.fixture
def hub(hub: HubServer, tmp_path: Path) -> HubServer:
    """The shared hub (tests/conftest.py) with one GGUF repo in it."""
    hub.add_repo(REPO, {FILE: write_tiny_gguf(tmp_path / "src.gguf").read_bytes()})
    return hub


def _patch_siblings(change: Callable[[dict[str, Any]], dict[str, Any]]) -> Callable[..., Any]:
    return lambda answer: answer | {"siblings": [change(s) for s in answer["siblings"]]}


FAULTS: dict[str, tuple[Callable[[HubServer], None], str]] = {
    "redirect loop": (
        lambda h: h.set_fault(REPO, FILE, Fault(redirect="SELF")),
        "redirect loop at",
    ),
    "redirect to file:": (
        lambda h: h.set_fault(REPO, FILE, Fault(redirect="file:///etc/passwd")),
        "refusing a non-HTTP URL 'file:///etc/passwd'",
    ),
    "redirect to ftp:": (
        lambda h: h.set_fault(REPO, FILE, Fault(redirect="ftp://example.com/x.gguf")),
        "refusing a non-HTTP URL 'ftp://",
    ),
    "redirect to a bad port": (
        lambda h: h.set_fault(REPO, FILE, Fault(redirect="http://127.0.0.1:99999/x")),
        "invalid URL",
    ),
    "portal instead of the file": (
        lambda h: h.set_fault(REPO, FILE, Fault(page=PORTAL)),
        "answered a web page (text/html) instead of the file",
    ),
    "portal instead of the listing": (
        lambda h: h.state.info_pages.__setitem__(REPO, PORTAL),
        "did not answer a Hub listing (JSONDecodeError",
    ),
    "listing is a list": (
        lambda h: h.state.info_patches.__setitem__(REPO, lambda a: [a]),
        "did not answer a Hub listing (TypeError",
    ),
    "siblings is a string": (
        lambda h: h.state.info_patches.__setitem__(REPO, lambda a: a | {"siblings": "x"}),
        "did not answer a Hub listing",
    ),
    "siblings of numbers": (
        lambda h: h.state.info_patches.__setitem__(REPO, lambda a: a | {"siblings": [1, 2]}),
        "did not answer a Hub listing",
    ),
    "file name a number": (
        lambda h: h.state.info_patches.__setitem__(REPO, _patch_siblings(lambda s: s | {"rfilename": 7})),
        "siblings[0].rfilename is 7, not a file name",
    ),
    "size -1": (
        lambda h: h.state.info_patches.__setitem__(REPO, _patch_siblings(lambda s: s | {"size": -1})),
        "siblings[0].size is -1, not a size in bytes",
    ),
    "size a string": (
        lambda h: h.state.info_patches.__setitem__(REPO, _patch_siblings(lambda s: s | {"size": "9"})),
        "siblings[0].size is '9'",
    ),
    "digest a list": (
        lambda h: h.state.info_patches.__setitem__(
            REPO, _patch_siblings(lambda s: s | {"lfs": s["lfs"] | {"sha256": ["x"]}})
        ),
        "siblings[0].lfs.sha256 is ['x'], not a SHA-256",
    ),
    "commit a number": (
        lambda h: h.state.info_patches.__setitem__(REPO, lambda a: a | {"sha": 123}),
        "sha is 123, not a commit id",
    ),
}  # fmt: skip


def _pull(ref: str = REPO) -> Puller:
    puller = Puller(open_registry())
    puller.downloader.backoff_s = 0.0
    puller.downloader.timeout_s = 5.0
    puller.pull(ref)
    return puller


def _nothing_left(repo: str = REPO) -> None:
    registry = open_registry()
    assert registry.list_models() == [] or all(
        r.source_repo != repo for r in registry.list_models()
    )
    folder = repo_folder(registry.models_dir, repo)
    leftovers = [p for p in folder.rglob("*") if p.is_file() and p.suffix == ".gguf"]
    assert leftovers == []


@pytest.mark.parametrize("name", list(FAULTS))
def test_each_fault_is_one_line_and_leaves_nothing(hub: HubServer, name: str) -> None:
    inject, expected = FAULTS[name]
    inject(hub)
    with pytest.raises(DownloadError) as caught:
        _pull()
    message = str(caught.value)
    assert expected in message and "\n" not in message
    _nothing_left()
    if name == "portal instead of the file":  # nothing of the page was kept to "resume"
        assert not any(repo_folder(open_registry().models_dir, REPO).glob("*.part"))


def test_a_file_name_too_long_for_the_disk_is_refused(hub: HubServer, tmp_path: Path) -> None:
    long_name = "x" * 296 + ".gguf"
    hub.add_repo(REPO, {long_name: write_tiny_gguf(tmp_path / "b.gguf").read_bytes()})
    with pytest.raises(DownloadError, match="a name of 301 bytes does not fit the file system"):
        _pull()
    _nothing_left()


def test_config_in_invalid_utf8_is_refused(hub: HubServer, tmp_path: Path) -> None:
    folder = write_tiny_hf(tmp_path / "st")
    files = {p.name: p.read_bytes() for p in folder.iterdir()}
    files["config.json"] = b'{"model_type": "llama\xff"}'
    hub.add_repo("org/st", files)
    with pytest.raises(DownloadError, match=r"org/st/config.json: not valid UTF-8 \(byte 0xff"):
        _pull("org/st")
    assert open_registry().list_models() == []


def test_the_cli_prints_one_line_and_exits_1(hub: HubServer, ember_home: Path) -> None:
    hub.set_fault(REPO, FILE, Fault(redirect="file:///etc/passwd"))
    proc = subprocess.run(
        [sys.executable, "-m", "ember", "pull", REPO],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[3],
    )
    assert proc.returncode == 1
    errors = [line for line in proc.stderr.splitlines() if line.startswith("ember: error:")]
    assert len(errors) == 1 and "refusing a non-HTTP URL" in errors[0]
    assert "Traceback" not in proc.stderr


def test_hub_file_names_with_control_characters_are_refused_and_printed_escaped(
    hub: HubServer, tmp_path: Path
) -> None:
    evil = "t-Q8_0\x1b[2J\nember: error: pwned.gguf"
    hub.add_repo(REPO, {evil: write_tiny_gguf(tmp_path / "c.gguf").read_bytes()})
    proc = subprocess.run(
        [sys.executable, "-m", "ember", "pull", REPO],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[3],
    )
    assert proc.returncode == 1 and "\x1b" not in proc.stdout + proc.stderr
    lines = (proc.stdout + proc.stderr).splitlines()
    assert not any(line.startswith("ember: error: pwned") for line in lines)
    errors = [line for line in lines if line.startswith("ember: error:")]
    assert len(errors) == 1 and "it contains control characters" in errors[0]
    _nothing_left()
