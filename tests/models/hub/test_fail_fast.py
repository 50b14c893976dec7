"""No Hub connection -> one line, at once: no backoff retries against a closed port."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from ember.models.errors import DownloadError
from ember.models.hub import client


def _closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound once, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def closed_hub(monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"http://127.0.0.1:{_closed_port()}"
    monkeypatch.setenv("HF_ENDPOINT", url)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    return url


def test_search_and_listing_do_not_retry_a_refused_connection(
    closed_hub: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from huggingface_hub.utils import _http as hub_http

    sleeps: list[float] = []
    monkeypatch.setattr(hub_http.time, "sleep", sleeps.append)  # the backoff's waits
    with pytest.raises(DownloadError) as search_error:
        client.search("gemma")
    with pytest.raises(DownloadError) as list_error:
        client.list_repo("unsloth/gemma-3-270m-it-GGUF")
    assert sleeps == []
    for error in (search_error, list_error):
        message = str(error.value)
        assert "\n" not in message and f"cannot reach the Hub at {closed_hub}" in message


def test_ember_search_fails_in_one_line(closed_hub: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "ember", "search", "gemma"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ember: error: search 'gemma': cannot reach")
