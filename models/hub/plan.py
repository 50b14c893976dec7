"""Planning a pull: the chosen files, every alternative, and whether each fits this machine.

Nothing big is downloaded here: GGUF hyperparameters come from the first bytes of the file (one
Range request, or the local file/.part when present), a safetensors repo's config.json and shard
index are fetched first because the index names the shards to get.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ember.models.errors import DownloadError
from ember.models.hub import client as hub
from ember.models.hub.client import HubFile, RepoListing
from ember.models.hub.fit import (
    HEADER_PEEK_BYTES,
    FitEstimate,
    Shape,
    estimate,
    shape_from_config,
    shape_from_gguf_header,
)
from ember.models.hub.select import Choice, PullRef, choose, gguf_choices
from ember.models.quants.kv_cache import DEFAULT_KV_CACHE
from ember.text import utf8_problem

INDEX_FILE = "model.safetensors.index.json"

Fetch = Callable[[HubFile, Path], Path]  # downloads one repo file into a folder
SAFETENSORS_DIR = "safetensors"  # a repo's safetensors set lives apart from its GGUF files


@dataclass(frozen=True)
class PullPlan:
    """What a pull will do: the commit, every choice, the chosen one, its folder and fit."""

    ref: PullRef
    commit: str
    choices: list[Choice]
    choice: Choice
    folder: Path
    fit: FitEstimate
    shape: Shape | None

    def fit_of(self, choice: Choice) -> FitEstimate:
        """The fit estimate of another choice of the same model (another quant)."""
        return estimate(
            choice.size_bytes,
            self.shape,
            self.fit.ctx,
            missing_bytes(self.folder, choice),
            self.folder,
            self.fit.kv_cache,
        )


def repo_folder(models_dir: Path, repo_id: str) -> Path:
    """Where Ember keeps a repo's downloaded GGUF files (safetensors: its SAFETENSORS_DIR)."""
    return models_dir / "hub" / repo_id.replace("/", "--")


def model_folder(models_dir: Path, repo_id: str, fmt: str) -> Path:
    """The folder a choice of this format downloads into."""
    folder = repo_folder(models_dir, repo_id)
    return folder / SAFETENSORS_DIR if fmt == "safetensors" else folder


def complete(path: Path, size_bytes: int | None) -> bool:
    """Whether a downloaded file is in place with the expected size."""
    return path.is_file() and (size_bytes is None or path.stat().st_size == size_bytes)


def missing_bytes(folder: Path, choice: Choice) -> int:
    """Bytes of the choice not yet downloaded into folder."""
    return sum(
        f.size_bytes or 0 for f in choice.files if not complete(folder / f.path, f.size_bytes)
    )


def make_plan(
    ref: PullRef,
    listing: RepoListing,
    models_dir: Path,
    ctx: int,
    fetch: Fetch,
    kv_cache: str = DEFAULT_KV_CACHE,
) -> PullPlan:
    """Choose the files for ref in listing and estimate the fit at context ctx, the KV cache
    in the kv_cache type (f16, q8, q4)."""
    choice = choose(listing, ref)
    folder = model_folder(models_dir, ref.repo_id, choice.format)
    if choice.format == "safetensors":
        shards, shape = safetensors_meta(ref, choice, lambda f: fetch(f, folder))
        choice = choose(listing, ref, shards)
    else:
        shape = gguf_shape(ref.repo_id, listing.commit, choice, folder)
    fit = estimate(choice.size_bytes, shape, ctx, missing_bytes(folder, choice), folder, kv_cache)
    choices = gguf_choices(listing) if choice.format == "gguf" else [choice]
    return PullPlan(ref, listing.commit, choices, choice, folder, fit, shape)


def gguf_shape(repo_id: str, commit: str, choice: Choice, folder: Path) -> Shape | None:
    """Hyperparameters from the first GGUF bytes: on disk (file or .part) or a Range request."""
    first_file = choice.files[0]
    first = folder / first_file.path
    for local in (first, first.with_name(first.name + ".part")):
        if local.is_file() and local.stat().st_size >= min(
            HEADER_PEEK_BYTES, first_file.size_bytes or 0
        ):
            with local.open("rb") as f:
                return shape_from_gguf_header(f.read(HEADER_PEEK_BYTES))
    import http.client

    from ember.models.hub.http import RedirectError, open_stream

    headers = hub.request_headers() | {"Range": f"bytes=0-{HEADER_PEEK_BYTES - 1}"}
    try:
        stream = open_stream(hub.resolve_url(repo_id, commit, first_file.path), headers, 30.0)
        try:
            ok = stream.status in (200, 206)
            head = stream.response.read(HEADER_PEEK_BYTES) if ok else b""
        finally:
            stream.close()
    except (OSError, http.client.HTTPException, RedirectError):
        return None  # the estimate says "?" for the KV cache; the download reports real errors
    return shape_from_gguf_header(head)


def safetensors_meta(
    ref: PullRef, choice: Choice, fetch: Callable[[HubFile], Path]
) -> tuple[list[str] | None, Shape | None]:
    """Fetch config.json and the shard index; returns the shards the index names and the shape."""
    shards = None
    shape = None
    for small in choice.files:
        if small.path not in ("config.json", INDEX_FILE):
            continue
        try:
            text = fetch(small).read_bytes().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DownloadError(f"{ref.repo_id}/{small.path}: {utf8_problem(exc)}") from None
        if small.path == "config.json":
            shape = shape_from_config(text)
            continue
        try:
            shards = sorted(set(json.loads(text)["weight_map"].values()))
        except (ValueError, KeyError, TypeError, AttributeError):
            raise DownloadError(f"{ref.repo_id}/{INDEX_FILE}: not a valid shard index") from None
    return shards, shape
