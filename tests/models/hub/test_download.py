from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

import pytest

from ember.models.errors import DownloadError
from ember.models.hub.download import DownloadCancelled, Downloader, DownloadProgress, RemoteFile
from tests.models.hub.hub_server import Fault, HubServer

REPO, FILE = "org/r", "m-Q4_0.gguf"
DATA = bytes(range(256)) * 12_000  # 3 MB, not all one value so corruption shows


@pytest.fixture
def hub(hub: HubServer) -> HubServer:
    """The shared hub fixture with this module's file in it."""
    hub.add_repo(REPO, {FILE: DATA})
    return hub


def _remote(hub: HubServer, dest: Path, sha: str | None = None) -> RemoteFile:
    url = f"{hub.url}/{REPO}/resolve/main/{FILE}"
    return RemoteFile(FILE, url, dest, len(DATA), sha or hashlib.sha256(DATA).hexdigest())


def _downloader(**kwargs: object) -> Downloader:
    options: dict[str, object] = {
        "headers": {},
        "backoff_s": 0.0,
        "timeout_s": 5.0,
        "chunk_bytes": 1 << 16,
    }
    options.update(kwargs)
    return Downloader(**options)  # type: ignore[arg-type]


def test_plain_download_is_verified_and_atomic(hub: HubServer, tmp_path: Path) -> None:
    events: list[DownloadProgress] = []
    dest = _downloader(on_progress=events.append).fetch(_remote(hub, tmp_path / "m.gguf"))
    assert dest.read_bytes() == DATA
    assert not (tmp_path / "m.gguf.part").exists() and not (tmp_path / "m.gguf.part.json").exists()
    assert events[-1].done and events[-1].bytes_done == len(DATA)
    assert all(e.bytes_total == len(DATA) for e in events)


def test_dropped_connection_resumes_with_range(hub: HubServer, tmp_path: Path) -> None:
    hub.set_fault(REPO, FILE, Fault(drop_after=1_000_000, times=2))
    dest = _downloader().fetch(_remote(hub, tmp_path / "m.gguf"))
    assert dest.read_bytes() == DATA
    ranges = [r for m, p, r in hub.state.requests if m == "GET"]
    assert ranges == [None, "bytes=1000000-", "bytes=2000000-"]
    assert hub.wait_served(REPO, FILE, len(DATA))  # the counter trails the last write a little
    assert hub.served(REPO, FILE) == len(DATA)


def test_drop_with_no_retries_keeps_part_then_resumes(hub: HubServer, tmp_path: Path) -> None:
    hub.set_fault(REPO, FILE, Fault(drop_after=1_500_000, times=1))
    with pytest.raises(
        DownloadError, match=r"1500000 bytes kept in .*m.gguf.part, rerun to resume"
    ):
        _downloader(retries=0).fetch(_remote(hub, tmp_path / "m.gguf"))
    assert (tmp_path / "m.gguf.part").stat().st_size == 1_500_000
    assert not (tmp_path / "m.gguf").exists()
    _downloader().fetch(_remote(hub, tmp_path / "m.gguf"))
    assert (tmp_path / "m.gguf").read_bytes() == DATA
    assert hub.wait_served(REPO, FILE, len(DATA))  # the counter trails the last write a little
    assert hub.served(REPO, FILE) == len(DATA)


def test_corrupt_bytes_detected_and_removed(hub: HubServer, tmp_path: Path) -> None:
    hub.set_fault(REPO, FILE, Fault(corrupt=True, times=1))
    with pytest.raises(DownloadError, match="SHA-256 mismatch.*corrupt file was deleted"):
        _downloader().fetch(_remote(hub, tmp_path / "m.gguf"))
    for leftover in ("m.gguf", "m.gguf.part", "m.gguf.part.json"):
        assert not (tmp_path / leftover).exists()
    _downloader().fetch(_remote(hub, tmp_path / "m.gguf"))  # the next run starts clean
    assert (tmp_path / "m.gguf").read_bytes() == DATA


def test_http_500_retried_then_clear_error(hub: HubServer, tmp_path: Path) -> None:
    hub.set_fault(REPO, FILE, Fault(status=500, times=2))
    assert _downloader(retries=2).fetch(_remote(hub, tmp_path / "a.gguf")).read_bytes() == DATA
    hub.set_fault(REPO, FILE, Fault(status=500))
    with pytest.raises(DownloadError, match=r"m-Q4_0.gguf: download failed \(HTTP 500\)"):
        _downloader(retries=1).fetch(_remote(hub, tmp_path / "b.gguf"))


def test_stall_times_out_and_resumes(hub: HubServer, tmp_path: Path) -> None:
    hub.set_fault(REPO, FILE, Fault(stall_after=700_000, times=1))
    dest = _downloader(timeout_s=0.3, retries=10).fetch(_remote(hub, tmp_path / "m.gguf"))
    assert dest.read_bytes() == DATA
    ranges = [r for m, p, r in hub.state.requests if m == "GET"]
    assert ranges[0] is None and ranges[1] is not None and ranges[1].startswith("bytes=")


def test_range_ignored_starts_over_cleanly(hub: HubServer, tmp_path: Path) -> None:
    hub.set_fault(REPO, FILE, Fault(drop_after=1_000_000, times=1))
    with pytest.raises(DownloadError):
        _downloader(retries=0).fetch(_remote(hub, tmp_path / "m.gguf"))
    hub.set_fault(REPO, FILE, Fault(ignore_range=True, times=1))
    dest = _downloader().fetch(_remote(hub, tmp_path / "m.gguf"))
    assert dest.read_bytes() == DATA  # not 1 MB of old bytes + the whole file again


def test_part_of_another_version_is_discarded(hub: HubServer, tmp_path: Path) -> None:
    part = tmp_path / "m.gguf.part"
    part.write_bytes(b"\xff" * 5000)
    (tmp_path / "m.gguf.part.json").write_text('{"sha256": "00", "size": 5000}')
    assert _downloader().fetch(_remote(hub, tmp_path / "m.gguf")).read_bytes() == DATA


def test_not_enough_disk_before_starting(hub: HubServer, tmp_path: Path) -> None:
    with pytest.raises(
        DownloadError, match=r"not enough disk space .*needs 3072000 bytes, 1000 free"
    ):
        _downloader(free_bytes=lambda _p: 1000).fetch(_remote(hub, tmp_path / "m.gguf"))
    assert hub.served(REPO, FILE) == 0


def test_disk_full_mid_transfer_keeps_resumable_part(
    hub: HubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    real_write = os.write
    budget = {"left": 1_200_000}

    def full_disk(fd: int, data: object) -> int:  # the disk fills after 1.2 MB
        view = memoryview(data)  # type: ignore[arg-type]
        if budget["left"] <= 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        written = real_write(fd, view[: budget["left"]])
        budget["left"] -= written
        return written

    monkeypatch.setattr("ember.models.hub.download.os.write", full_disk)
    with pytest.raises(
        DownloadError, match=r"disk full while writing .*m.gguf.part \(1200000 bytes kept\)"
    ):
        _downloader().fetch(_remote(hub, tmp_path / "m.gguf"))
    monkeypatch.setattr("ember.models.hub.download.os.write", real_write)
    assert (tmp_path / "m.gguf.part").stat().st_size == 1_200_000
    _downloader().fetch(_remote(hub, tmp_path / "m.gguf"))
    assert (tmp_path / "m.gguf").read_bytes() == DATA


def test_cancel_keeps_part(hub: HubServer, tmp_path: Path) -> None:
    cancel = threading.Event()

    def stop_at_half(event: DownloadProgress) -> None:  # the first event comes after one chunk
        if 0 < event.bytes_done < len(DATA):
            cancel.set()

    with pytest.raises(DownloadCancelled, match="cancelled; .* kept in"):
        _downloader(on_progress=stop_at_half, cancel=cancel).fetch(
            _remote(hub, tmp_path / "m.gguf")
        )
    kept = (tmp_path / "m.gguf.part").stat().st_size
    assert 0 < kept < len(DATA)
    _downloader().fetch(_remote(hub, tmp_path / "m.gguf"))
    assert (tmp_path / "m.gguf").read_bytes() == DATA


def test_concurrent_fetches_share_one_file(hub: HubServer, tmp_path: Path) -> None:
    hub.set_fault(REPO, FILE, Fault(stall_after=500_000, times=1))
    waited = threading.Event()
    errors: list[BaseException] = []

    def fetch(**kwargs: object) -> None:
        try:
            _downloader(**kwargs).fetch(_remote(hub, tmp_path / "m.gguf"))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    first = threading.Thread(target=fetch)
    first.start()
    assert hub.wait_served(REPO, FILE, 500_000)
    second = threading.Thread(target=fetch, kwargs={"on_wait": lambda _f: waited.set()})
    second.start()
    assert waited.wait(10)
    hub.state.release_stall.set()
    first.join(30)
    second.join(30)
    assert errors == []
    assert (tmp_path / "m.gguf").read_bytes() == DATA
    assert hub.wait_served(REPO, FILE, len(DATA))  # the counter trails the last write a little
    assert hub.served(REPO, FILE) == len(DATA)


def test_part_hasher_follows_the_file(tmp_path: Path) -> None:
    from ember.models.hub.download_hash import PartHasher

    part = tmp_path / "x.part"
    part.write_bytes(b"abc")
    hasher = PartHasher()
    hasher.sync(part)  # a resume: hashes what is on disk
    hasher.feed(b"def")
    with part.open("ab") as f:
        f.write(b"def")
    assert hasher.hexdigest() == hashlib.sha256(b"abcdef").hexdigest()
    part.write_bytes(b"xy")  # the file was restarted behind the hasher's back
    hasher.sync(part)
    assert hasher.hexdigest() == hashlib.sha256(b"xy").hexdigest()
