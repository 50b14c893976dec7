from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from ember.app.loading import open_registry
from ember.models.errors import DownloadError
from ember.models.hub.download import DownloadProgress
from ember.models.hub.plan import repo_folder
from ember.models.hub.pull import Puller
from tests.fixtures.quick_gguf import write_tiny_gguf
from tests.models.hub.hub_server import Fault, HubServer


def _gguf_bytes(tmp_path: Path, name: str, rows: int = 64, seed: int = 0) -> bytes:
    return write_tiny_gguf(tmp_path / "src" / name, n_vocab=rows, seed=seed).read_bytes()


def _puller(**kwargs: object) -> Puller:
    puller = Puller(open_registry(), **kwargs)  # type: ignore[arg-type]
    puller.downloader.backoff_s = 0.0
    puller.downloader.timeout_s = 5.0
    return puller


def test_pull_default_quant_and_register(hub: HubServer, tmp_path: Path) -> None:
    q4 = _gguf_bytes(tmp_path, "a.gguf", seed=1)
    q8 = _gguf_bytes(tmp_path, "b.gguf", rows=128, seed=2)
    hub.add_repo(
        "org/tiny-GGUF", {"tiny-Q8_0.gguf": q8, "tiny-Q4_K_M.gguf": q4, "README.md": b"hi"}
    )
    events: list[DownloadProgress] = []
    result = _puller(on_progress=events.append).pull("org/tiny-GGUF")
    record = result.record
    assert record.name == "org/tiny-GGUF:Q4_K_M" and record.quant == "Q4_K_M"
    assert record.path.read_bytes() == q4
    assert record.sha256 == hashlib.sha256(q4).hexdigest()
    assert record.owned and record.source_repo == "org/tiny-GGUF"
    assert record.architecture == "llama"
    assert hub.served("org/tiny-GGUF", "tiny-Q8_0.gguf") == 0
    assert events[-1].done and events[-1].bytes_done == events[-1].bytes_total == len(q4)
    assert open_registry().resolve("org/tiny-GGUF").path == record.path
    # a second pull downloads nothing
    again = _puller().pull("org/tiny-GGUF:Q4_K_M")
    assert again.downloaded_bytes == 0 and again.source == "ember"


def test_pull_named_quant_and_file(hub: HubServer, tmp_path: Path) -> None:
    q8 = _gguf_bytes(tmp_path, "b.gguf", seed=2)
    hub.add_repo("org/r", {"sub/m-Q8_0.gguf": q8, "m-F16.gguf": _gguf_bytes(tmp_path, "c.gguf")})
    assert _puller().pull("org/r:q8_0").record.path.read_bytes() == q8
    record = _puller().pull("org/r/m-F16.gguf").record
    assert record.quant == "F16" and record.path.name == "m-F16.gguf"
    with pytest.raises(DownloadError, match=r"no Q2_K GGUF in org/r \(has: Q8_0, F16\)"):
        _puller().pull("org/r:Q2_K")
    with pytest.raises(DownloadError, match="nope.gguf: file not found"):
        _puller().pull("org/r/nope.gguf")


def test_split_gguf(hub: HubServer, tmp_path: Path) -> None:
    parts = {
        f"big-Q4_K_M-0000{i}-of-00003.gguf": _gguf_bytes(tmp_path, f"s{i}.gguf", seed=i)
        for i in (1, 2, 3)
    }
    hub.add_repo("org/split", parts)
    record = _puller().pull("org/split").record
    assert record.name == "org/split:Q4_K_M"
    assert record.path.name == "big-Q4_K_M-00001-of-00003.gguf"
    assert record.size_bytes == sum(len(b) for b in parts.values())
    for name, data in parts.items():
        assert (record.path.parent / name).read_bytes() == data


def test_incomplete_split_is_refused(hub: HubServer, tmp_path: Path) -> None:
    hub.add_repo("org/split", {"big-Q4_0-00001-of-00002.gguf": _gguf_bytes(tmp_path, "s.gguf")})
    with pytest.raises(DownloadError, match="split GGUF is incomplete"):
        _puller().pull("org/split")


def test_errors_name_what_and_how(hub: HubServer, tmp_path: Path) -> None:
    hub.add_repo("org/private", {"m-Q4_0.gguf": b"x"})
    hub.state.repo_status["org/private"] = 401
    with pytest.raises(DownloadError, match="org/private.*hf auth login.*HF_TOKEN"):
        _puller().pull("org/private")
    hub.state.repo_status["org/private"] = 403
    with pytest.raises(DownloadError, match="org/private.*gated.*hf auth login"):
        _puller().pull("org/private")
    with pytest.raises(DownloadError, match="org/missing: repository not found"):
        _puller().pull("org/missing")
    hub.add_repo("org/pickle", {"pytorch_model.bin": b"x" * 10, "config.json": b"{}"})
    with pytest.raises(DownloadError, match="only pickle checkpoints.*never loads pickle"):
        _puller().pull("org/pickle")


def test_hub_unreachable_or_failing(hub: HubServer, monkeypatch: pytest.MonkeyPatch) -> None:
    hub.add_repo("org/r", {"m-Q4_0.gguf": b"x"})
    hub.state.repo_status["org/r"] = 500
    with pytest.raises(DownloadError, match="org/r: the Hub answered HTTP 500; try again later"):
        _puller().plan("org/r")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens on the discard port
    with pytest.raises(DownloadError, match=r"org/r: cannot reach the Hub at http://127.0.0.1:9"):
        _puller().plan("org/r")


def test_small_file_checked_by_git_blob_id(hub: HubServer, tmp_path: Path) -> None:
    from tests.fixtures.quick_hf import write_tiny_hf

    folder = write_tiny_hf(tmp_path / "st")
    hub.add_repo("org/st", {p.name: p.read_bytes() for p in folder.iterdir()})
    hub.set_fault("org/st", "config.json", Fault(corrupt=True, times=1))
    with pytest.raises(DownloadError, match="config.json: git blob SHA-1 mismatch.*deleted"):
        _puller().pull("org/st")
    assert _puller().pull("org/st").record.format == "safetensors"  # the next run is clean


def test_safetensors_suffix_when_gguf_exists_too(hub: HubServer, tmp_path: Path) -> None:
    from tests.fixtures.quick_hf import write_tiny_hf

    folder = write_tiny_hf(tmp_path / "st")
    files = {p.name: p.read_bytes() for p in folder.iterdir()}
    hub.add_repo("org/both", files | {"m-Q4_0.gguf": _gguf_bytes(tmp_path, "a.gguf")})
    gguf = _puller().pull("org/both").record
    assert gguf.format == "gguf"
    record = _puller().pull("org/both:safetensors").record
    assert record.format == "safetensors" and record.name == "org/both"
    assert not (record.path / gguf.path.name).exists()  # the two sets live apart
    assert open_registry().remove("org/both") > 0
    assert gguf.path.exists() and not record.path.exists()
    assert _puller(offline=True).pull("org/both").record.path == gguf.path
    hub.add_repo("org/only-gguf", {"m-Q4_0.gguf": b"x"})
    with pytest.raises(DownloadError, match="no safetensors weights in org/only-gguf"):
        _puller().pull("org/only-gguf:safetensors")


def test_file_404_names_file(hub: HubServer, tmp_path: Path) -> None:
    hub.add_repo("org/r", {"m-Q4_0.gguf": _gguf_bytes(tmp_path, "a.gguf")})
    hub.set_fault("org/r", "m-Q4_0.gguf", Fault(status=404))
    with pytest.raises(DownloadError, match="m-Q4_0.gguf: not found on the Hub"):
        _puller().pull("org/r")


@pytest.mark.parametrize("bad", ["../evil.gguf", "/abs-Q4_0.gguf", "a/../../x-Q4_0.gguf"])
def test_path_traversal_rejected(hub: HubServer, tmp_path: Path, bad: str) -> None:
    hub.add_repo("org/evil", {bad: b"x" * 100, "ok-Q4_0.gguf": b"y"})
    with pytest.raises(DownloadError, match="refusing Hub file name"):
        _puller().pull("org/evil")
    assert not (tmp_path / "evil.gguf").exists()
    assert all(method != "GET" or "/resolve/" not in path for method, path, _ in hub.state.requests)


def test_offline_never_touches_network(
    hub: HubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _gguf_bytes(tmp_path, "a.gguf")
    hub.add_repo("org/r", {"m-Q4_K_M.gguf": data})
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DownloadError, match=r"org/r: offline .*not on this machine"):
        _puller().pull("org/r")
    assert hub.state.requests == []
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    _puller().pull("org/r")
    count = len(hub.state.requests)
    result = _puller(offline=True).pull("org/r")
    assert result.source == "ember" and result.record.path.read_bytes() == data
    assert len(hub.state.requests) == count


def test_hf_cache_is_reused(hub: HubServer, tmp_path: Path) -> None:
    from huggingface_hub import hf_hub_download

    from ember.models.hub.client import hf_cache_dir

    data = _gguf_bytes(tmp_path, "a.gguf")
    hub.add_repo("org/cached", {"m-Q4_K_M.gguf": data})
    cached = hf_hub_download(
        "org/cached", "m-Q4_K_M.gguf", cache_dir=hf_cache_dir(), endpoint=hub.url
    )
    before = len(hub.state.requests)
    result = _puller().pull("org/cached")
    assert result.source == "hf-cache" and result.downloaded_bytes == 0
    assert result.record.path == Path(cached) and not result.record.owned
    gets = [r for r in hub.state.requests[before:] if r[0] == "GET" and "/resolve/" in r[1]]
    assert all(
        rng is not None and rng.startswith("bytes=0-") for _, _, rng in gets
    )  # header peek only
    assert open_registry().remove("org/cached:Q4_K_M") == 0 and Path(cached).exists()


def test_repo_folder_layout(tmp_path: Path) -> None:
    assert repo_folder(tmp_path, "org/name") == tmp_path / "hub" / "org--name"


def test_pull_events_iterator(hub: HubServer, tmp_path: Path) -> None:
    import threading

    from ember.models.hub.download import DownloadCancelled
    from ember.models.hub.events import pull_events
    from ember.models.hub.pull import PullResult

    data = write_tiny_gguf(tmp_path / "big.gguf", n_vocab=8192).read_bytes()
    hub.add_repo("org/ev", {"m-Q4_0.gguf": data})
    items = list(pull_events("org/ev", open_registry()))
    assert isinstance(items[-1], PullResult) and items[-1].record.path.read_bytes() == data
    progress = [i for i in items if isinstance(i, DownloadProgress)]
    assert progress[-1].done and progress[-1].bytes_done == len(data)
    with pytest.raises(DownloadError, match="org/missing: repository not found"):
        list(pull_events("org/missing", open_registry()))
    hub.add_repo("org/ev2", {"m-Q4_0.gguf": data})
    hub.set_fault("org/ev2", "m-Q4_0.gguf", Fault(stall_after=len(data) // 2, times=2))
    cancel = threading.Event()
    with pytest.raises(DownloadCancelled, match="cancelled; .* kept in"):
        for item in pull_events("org/ev2", open_registry(), cancel=cancel):
            if isinstance(item, DownloadProgress) and 0 < item.bytes_done < len(data):
                cancel.set()  # the TUI's "cancel" button
                hub.state.release_stall.set()
    part = repo_folder(open_registry().models_dir, "org/ev2") / "m-Q4_0.gguf.part"
    # The cancel can land after the rest of the file arrived in one read (the stall was
    # released): the .part then holds every byte, but it is never renamed into place.
    assert 0 < part.stat().st_size <= len(data)
    assert not part.with_suffix("").exists()
    resumed = list(pull_events("org/ev2", open_registry()))  # the rerun resumes from the .part
    assert isinstance(resumed[-1], PullResult) and resumed[-1].record.path.read_bytes() == data
    assert not part.exists()
