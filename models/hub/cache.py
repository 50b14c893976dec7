"""Models already on disk: the Hugging Face cache and Ember's own download folders.

Files in the HF cache are used in place (never downloaded twice): an LFS blob there is named by its
SHA-256, so a cached file whose blob name equals the Hub's digest is the right bytes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ember.models.hub.client import HubFile, RepoListing, hf_cache_dir

_SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class CachedModel:
    """A model found in the HF cache: repo, commit, format, label (quant) and local path."""

    repo_id: str
    commit: str
    format: str
    label: str
    path: Path  # the GGUF file (first shard) or the snapshot folder for safetensors
    size_bytes: int


def repo_cache_folder(repo_id: str) -> Path:
    """hf cache folder of a model repo: models--org--name."""
    return hf_cache_dir() / ("models--" + repo_id.replace("/", "--"))


def snapshot_dir(repo_id: str, revision: str | None) -> Path | None:
    """The snapshot folder for a revision (a commit, or a ref such as main), if cached."""
    folder = repo_cache_folder(repo_id)
    rev = revision or "main"
    ref_file = folder / "refs" / rev
    if ref_file.is_file():
        rev = ref_file.read_text().strip()
    snap = folder / "snapshots" / rev
    return snap if snap.is_dir() else None


def local_listing(folder: Path, repo_id: str, commit: str) -> RepoListing:
    """A RepoListing of the files under folder (sizes; SHA-256 when a blob is named by it)."""
    files = []
    for path in sorted(folder.rglob("*")):
        if not path.is_file() or path.name.endswith((".part", ".lock", ".json.part", ".part.json")):
            continue
        blob = path.resolve().name
        sha = blob if _SHA256.match(blob) else None
        files.append(HubFile(path.relative_to(folder).as_posix(), path.stat().st_size, sha))
    return RepoListing(repo_id, commit, files)


def cached_file(repo_id: str, commit: str, file: HubFile) -> Path | None:
    """The HF-cache copy of a Hub file at commit, if present with the right size and digest."""
    snap = snapshot_dir(repo_id, commit)
    if snap is None:
        return None
    path = snap / file.path
    if not path.is_file():
        return None
    if file.size_bytes is not None and path.stat().st_size != file.size_bytes:
        return None
    if file.sha256 is not None and path.resolve().name != file.sha256:
        from ember.models.hub.download import sha256_of

        if sha256_of(path) != file.sha256:
            return None
    return path


def discover() -> list[CachedModel]:
    """Every GGUF quant and safetensors model in the HF cache (latest snapshot of each repo)."""
    from ember.models.hub.select import gguf_choices, safetensors_choice

    root = hf_cache_dir()
    found: list[CachedModel] = []
    if not root.is_dir():
        return found
    for repo_folder in sorted(root.glob("models--*--*")):
        repo_id = repo_folder.name[len("models--") :].replace("--", "/", 1)
        snaps = sorted((repo_folder / "snapshots").glob("*"), key=lambda p: p.stat().st_mtime)
        if not snaps:
            continue
        snap = snaps[-1]
        listing = local_listing(snap, repo_id, snap.name)
        for choice in gguf_choices(listing):
            found.append(
                CachedModel(
                    repo_id,
                    snap.name,
                    "gguf",
                    choice.label,
                    snap / choice.files[0].path,
                    choice.size_bytes,
                )
            )
        st = safetensors_choice(listing)
        if st is not None and listing.file("config.json") is not None:
            found.append(
                CachedModel(repo_id, snap.name, "safetensors", "safetensors", snap, st.size_bytes)
            )
    return found
