from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ember.app.cli import main
from tests.fixtures.quick_gguf import write_tiny_gguf
from tests.fixtures.quick_hf import write_tiny_hf
from tests.models.hub.hub_server import HubServer


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_show_gguf_path_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_tiny_gguf(tmp_path / "tiny.gguf")
    code, out, _ = _run(capsys, "show", str(path), "--json")
    assert code == 0
    info = json.loads(out)
    assert info["format"] == "gguf" and info["architecture"] == "llama"
    assert info["context_length"] == 256  # quick_gguf's default
    assert info["size_bytes"] == path.stat().st_size
    import hashlib

    assert info["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert info["path"] == str(path.resolve())


def test_show_text_and_unknown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = write_tiny_hf(tmp_path / "st")
    code, out, _ = _run(capsys, "show", str(folder))
    assert code == 0
    assert "architecture" in out and "llama" in out and "sha256" in out
    code, _, err = _run(capsys, "show", "missing-model")
    assert code == 1
    assert "missing-model" in err and "ember pull" in err


def test_list_empty_then_added(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("ember.models.registry.starter.starter_installed", lambda: False)
    code, out, _ = _run(capsys, "list")
    assert code == 0 and "No local models" in out
    from ember.app.loading import open_registry

    open_registry().add_path(write_tiny_gguf(tmp_path / "a.gguf"))
    code, out, _ = _run(capsys, "list", "--json")
    rows = json.loads(out)
    assert [r["name"] for r in rows] == ["a"] and rows[0]["present"] is True
    code, out, _ = _run(capsys, "list")
    assert out.splitlines()[0].split()[:3] == ["NAME", "FORMAT", "ARCH"]
    assert out.splitlines()[1].startswith("a ")


@pytest.mark.model
def test_show_starter_offline(ember_home: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "ember", "show", "gemma3-270m", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    assert info["architecture"] == "gemma3"
    assert info["context_length"] == 32768
    assert info["size_bytes"] == 253113024
    assert info["sha256"] == "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
    assert Path(info["path"]).is_relative_to(ember_home)


# ---- rm / du / add / alias ------------------------------------------------------------------


def test_add_alias_du_rm_in_place(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("ember.models.registry.starter.starter_installed", lambda: False)
    path = write_tiny_gguf(tmp_path / "user" / "mine.gguf")
    code, out, _ = _run(capsys, "add", str(path))
    assert code == 0 and "Added mine: gguf, llama" in out
    code, out, _ = _run(capsys, "alias", "m", "mine")
    assert code == 0 and out.strip() == "m -> mine"
    code, out, _ = _run(capsys, "du", "--json")
    usage = json.loads(out)
    assert usage["models"] == {"mine": path.stat().st_size} and usage["owned_bytes"] == 0
    assert usage["caches"] == {"packed": 0, "prefix": 0, "downloads": 0}
    snapshot = tmp_path / "ember_home" / "cache" / "prefix" / "ab" / "snap.kv"
    snapshot.parent.mkdir(parents=True)
    snapshot.write_bytes(b"x" * 1000)
    code, out, _ = _run(capsys, "du")
    assert code == 0 and "prompt KV snapshots" in out
    assert json.loads(_run(capsys, "du", "--json")[1])["caches"]["prefix"] == 1000
    code, out, err = _run(capsys, "rm", "m")  # stdin is not a terminal: refuses without -y
    assert code == 1 and "pass -y" in err and "stay where they are" in err
    code, out, _ = _run(capsys, "rm", "m", "-y")
    assert code == 0 and out.strip() == "Removed mine"
    assert path.exists()
    code, _, err = _run(capsys, "rm", "mine", "-y")
    assert code == 1 and "mine: no such model" in err


def test_add_rejects_non_models(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text("hello")
    code, _, err = _run(capsys, "add", str(bad))
    assert code == 1 and "not a model" in err
    code, _, err = _run(capsys, "add", str(tmp_path / "nope.gguf"))
    assert code == 1 and "no such file" in err


def test_rm_confirms_on_a_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from ember.app.loading import open_registry
    from ember.models.registry.store import ModelRecord

    registry = open_registry()
    path = write_tiny_gguf(registry.models_dir / "hub" / "org--r" / "m.gguf")
    registry.register(ModelRecord(name="org/r:Q4_0", path=path, format="gguf", owned=True))
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("builtins.input", lambda _prompt: "n")
    code, out, _ = _run(capsys, "rm", "org/r:Q4_0")
    assert code == 1 and "Nothing removed" in out and path.exists()
    monkeypatch.setattr("builtins.input", lambda _prompt: "y")
    code, out, _ = _run(capsys, "rm", "org/r:Q4_0")
    assert code == 0 and "freed" in out and not path.exists()


# ---- against the fake Hub -------------------------------------------------------------------


def test_search(hub: HubServer, capsys: pytest.CaptureFixture[str]) -> None:
    hub.add_repo("org/tiny-GGUF", {"a-Q4_0.gguf": b"x" * 5000}, downloads=5, tags=["gguf"])
    hub.add_repo(
        "org/tiny-st",
        {"model.safetensors": b"z", "config.json": b"{}"},
        downloads=50,
        tags=["safetensors"],
    )
    hub.add_repo("org/other", {"a-Q4_0.gguf": b"x"}, downloads=500, tags=["gguf"])
    code, out, _ = _run(capsys, "search", "tiny")
    lines = out.splitlines()
    assert code == 0 and lines[0].split()[:3] == ["REPO", "DOWNLOADS", "FORMATS"]
    assert [line.split()[0] for line in lines[1:]] == ["org/tiny-st", "org/tiny-GGUF"]
    code, out, _ = _run(capsys, "search", "tiny", "--gguf", "--json")
    assert [h["repo"] for h in json.loads(out)] == ["org/tiny-GGUF"]
    assert json.loads(out)[0]["storage_bytes"] == 5000


def test_search_offline(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "search", "x")
    assert code == 1 and "offline" in err


def test_pull_list_then_pull_json(
    hub: HubServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    q4 = write_tiny_gguf(tmp_path / "a.gguf", n_vocab=64).read_bytes()
    hub.add_repo("org/t-GGUF", {"t-Q4_K_M.gguf": q4, "t-Q8_0.gguf": q4 + b""})
    code, out, _ = _run(capsys, "pull", "org/t-GGUF", "--list")
    assert code == 0 and "* Q4_K_M" in out and "Q8_0" in out and "KV@4096" in out
    # KV: 2 (K, V) x 2 layers x 1 kv head x 32 dims x 4096 tokens x 2 bytes = 1048576
    assert "1.0 MB" in out
    assert not list((tmp_path / "ember_home").rglob("*.gguf"))
    code, out, err = _run(capsys, "pull", "org/t-GGUF", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["name"] == "org/t-GGUF:Q4_K_M" and result["downloaded_bytes"] == len(q4)
    code, out, _ = _run(capsys, "show", "org/t-GGUF", "--json")
    assert json.loads(out)["source"].startswith("org/t-GGUF")
    code, out, _ = _run(capsys, "pull", "org/t-GGUF", "--offline")
    assert code == 0 and "already downloaded" in out
    code, out, _ = _run(capsys, "rm", "org/t-GGUF:Q4_K_M", "-y")
    assert code == 0 and "freed" in out
    assert not list((tmp_path / "ember_home").rglob("*.gguf"))
    assert not (tmp_path / "ember_home" / "data" / "models" / "hub").exists()  # no leftovers


def test_pull_list_shows_a_mixture_of_experts_total_and_active(
    hub: HubServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    moe = write_tiny_gguf(tmp_path / "moe.gguf", "qwen3moe", n_vocab=64).read_bytes()
    hub.add_repo("org/moe-GGUF", {"moe-Q4_K_M.gguf": moe})
    code, out, _ = _run(capsys, "pull", "org/moe-GGUF", "--list")
    assert code == 0 and "mixture of experts: 2 of 4 experts per token" in out
    assert "B active (token tables not counted)" in out and "RAM MMAP/RESIDENT" in out


def test_pull_offline_names_what_is_missing(
    hub: HubServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(capsys, "pull", "org/absent", "--offline")
    assert code == 1 and "org/absent: offline" in err and "not on this machine" in err
    assert hub.state.requests == []


def test_pull_safetensors_repo_end_to_end(
    hub: HubServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = write_tiny_hf(tmp_path / "src", n_shards=2)
    files = {p.name: p.read_bytes() for p in src.iterdir()}
    files["pytorch_model.bin"] = b"pickle"  # never fetched: safetensors exist
    files["original/consolidated.safetensors"] = b"unused"
    files["model-99999-of-99999.safetensors"] = b"not in the index"
    hub.add_repo("org/tiny-st", files)
    code, out, err = _run(capsys, "pull", "org/tiny-st")
    assert code == 0, err
    from ember.app.loading import open_registry

    resolved = open_registry().resolve("org/tiny-st")
    assert resolved.format == "safetensors" and resolved.architecture == "llama"
    got = sorted(p.name for p in resolved.path.iterdir() if not p.name.endswith(".lock"))
    want = sorted(
        n
        for n in files
        if "/" not in n and n not in ("pytorch_model.bin", "model-99999-of-99999.safetensors")
    )
    assert got == want
    for name in want:
        assert (resolved.path / name).read_bytes() == files[name]
    assert hub.served("org/tiny-st", "pytorch_model.bin") == 0
    code, out, _ = _run(capsys, "rm", "org/tiny-st", "-y")
    assert code == 0 and "freed" in out and not resolved.path.exists()


# ---- pull, then `ember run` what arrived ----------------------------------------------------


def _run_json(ref: str, runner: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-m", "ember", "run", ref, "Hello", "--runner", runner]
        + ["--temperature", "0", "--max-tokens", "6", "--raw", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def test_pull_safetensors_then_run(hub: HubServer, tiny_models: Any) -> None:
    pytest.importorskip(
        "ember.engine.runners.torch.runner", reason="the torch runner is not on main yet"
    )
    src = tiny_models.hf_dir("llama")
    hub.add_repo("org/tiny-llama", {p.name: p.read_bytes() for p in src.iterdir() if p.is_file()})
    assert main(["pull", "org/tiny-llama"]) == 0
    pulled = _run_json("org/tiny-llama", "torch")
    direct = _run_json(str(src), "torch")
    assert pulled["token_ids"] == direct["token_ids"] and len(pulled["token_ids"]) > 0  # type: ignore[arg-type]


def test_pull_gguf_then_run(hub: HubServer, tiny_models: Any) -> None:
    pytest.importorskip(
        "ember.engine.runners.llamacpp.runner", reason="the llama.cpp runner is not on main yet"
    )
    src = tiny_models.gguf("llama", "Q8_0")
    hub.add_repo("org/tiny-llama-GGUF", {"tiny-llama-Q8_0.gguf": src.read_bytes()})
    assert main(["pull", "org/tiny-llama-GGUF"]) == 0
    pulled = _run_json("org/tiny-llama-GGUF", "llama.cpp")
    direct = _run_json(str(src), "llama.cpp")
    assert pulled["token_ids"] == direct["token_ids"] and len(pulled["token_ids"]) > 0  # type: ignore[arg-type]
