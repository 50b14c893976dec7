"""`ember pull`: list a repo, choose the files, check the fit, download (or reuse), register.

Downloads land in `<models_dir>/hub/<org>--<repo>/<path in repo>`; files already in the Hugging
Face cache are registered in place instead. Offline (`--offline` / HF_HUB_OFFLINE=1) only looks
at the disk and says what is missing.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ember.models import hub
from ember.models.download import Downloader, ProgressCallback, RemoteFile
from ember.models.errors import DownloadError, ModelFileError
from ember.models.hub_fit import (
    HEADER_PEEK_BYTES,
    FitEstimate,
    Shape,
    estimate,
    shape_from_config,
    shape_from_gguf_header,
)
from ember.models.hub_select import Choice, PullRef, choose, gguf_choices, parse_ref
from ember.models.registry import Registry
from ember.models.registry_store import ModelRecord

INDEX_FILE = "model.safetensors.index.json"


@dataclass(frozen=True)
class PullPlan:
    """What a pull will do: the listing, every choice, the chosen one and its fit."""

    ref: PullRef
    commit: str
    choices: list[Choice]
    choice: Choice
    folder: Path
    fit: FitEstimate
    shape: Shape | None

    def fit_of(self, choice: Choice) -> FitEstimate:
        """The fit estimate of another choice of the same model (another quant)."""
        missing = sum(
            f.size_bytes or 0
            for f in choice.files
            if not _complete(self.folder / f.path, f.size_bytes)
        )
        return estimate(choice.size_bytes, self.shape, self.fit.ctx, missing, self.folder)


@dataclass
class PullResult:
    """A finished pull: the registry record, bytes downloaded and where the files came from."""

    record: ModelRecord
    downloaded_bytes: int = 0
    source: str = "hub"  # "hub" | "ember" (already downloaded) | "hf-cache" | "starter"
    plan: PullPlan | None = None
    notes: list[str] = field(default_factory=list)


def repo_folder(models_dir: Path, repo_id: str) -> Path:
    """Where Ember keeps a repo's downloaded files."""
    return models_dir / "hub" / repo_id.replace("/", "--")


def record_name(repo_id: str, choice: Choice) -> str:
    """Registry name: org/repo:QUANT for a GGUF quant, org/repo for safetensors."""
    if choice.format == "safetensors":
        return repo_id
    if choice.label == choice.files[0].path:
        return f"{repo_id}/{choice.label}"
    return f"{repo_id}:{choice.label}"


class Puller:
    """Pulls one reference at a time; progress and notes go to callbacks (CLI bar, TUI events)."""

    def __init__(
        self,
        registry: Registry | None = None,
        *,
        offline: bool = False,
        ctx: int = 4096,
        on_progress: ProgressCallback | None = None,
        on_note: Callable[[str], None] | None = None,
        cancel: threading.Event | None = None,
        downloader: Downloader | None = None,
    ) -> None:
        self.registry = registry or Registry()
        self.offline = hub.is_offline(offline)
        self.ctx = ctx
        self.on_note = on_note or (lambda _text: None)
        self.downloader = downloader or Downloader(hub.request_headers(), on_progress, cancel)

    # ---- planning ------------------------------------------------------------------------

    def plan(self, ref_text: str) -> PullPlan:
        """List the repo and choose the files (network); nothing is downloaded but small headers."""
        ref, _alias = _parse(ref_text)
        if self.offline:
            raise DownloadError(f"{ref}: offline mode is on; cannot list the repo on the Hub")
        listing = hub.list_repo(ref.repo_id, ref.revision)
        choice = choose(listing, ref)
        folder = repo_folder(self.registry.models_dir, ref.repo_id)
        shape = None
        if choice.format == "safetensors":
            shards, shape = self._safetensors_meta(ref, listing.commit, choice, folder)
            choice = choose(listing, ref, shards)
        else:
            shape = self._gguf_shape(ref.repo_id, listing.commit, choice, folder)
        missing = sum(
            f.size_bytes or 0 for f in choice.files if not _complete(folder / f.path, f.size_bytes)
        )
        fit = estimate(choice.size_bytes, shape, self.ctx, missing, folder)
        choices = gguf_choices(listing) if choice.format == "gguf" else [choice]
        return PullPlan(ref, listing.commit, choices, choice, folder, fit, shape)

    def _gguf_shape(self, repo_id: str, commit: str, choice: Choice, folder: Path) -> Shape | None:
        """Hyperparameters from the first GGUF bytes: on disk (file or .part) or a Range request."""
        first = folder / choice.files[0].path
        for local in (first, first.with_name(first.name + ".part")):
            if local.is_file() and local.stat().st_size >= min(
                HEADER_PEEK_BYTES, choice.files[0].size_bytes or 0
            ):
                with local.open("rb") as f:
                    return shape_from_gguf_header(f.read(HEADER_PEEK_BYTES))
        from ember.models.hub_http import open_stream

        headers = hub.request_headers() | {"Range": f"bytes=0-{HEADER_PEEK_BYTES - 1}"}
        try:
            stream = open_stream(
                hub.resolve_url(repo_id, commit, choice.files[0].path), headers, 30.0
            )
            try:
                head = (
                    stream.response.read(HEADER_PEEK_BYTES) if stream.status in (200, 206) else b""
                )
            finally:
                stream.close()
        except OSError:
            return None
        return shape_from_gguf_header(head)

    def _safetensors_meta(
        self, ref: PullRef, commit: str, choice: Choice, folder: Path
    ) -> tuple[list[str] | None, Shape | None]:
        """Fetch config.json and the shard index first: the index names the shards to get."""
        shards = None
        shape = None
        for small in choice.files:
            if small.path not in ("config.json", INDEX_FILE):
                continue
            path = self._fetch(ref.repo_id, commit, small, folder)
            text = path.read_text(encoding="utf-8")
            if small.path == "config.json":
                shape = shape_from_config(text)
            else:
                try:
                    shards = sorted(set(json.loads(text)["weight_map"].values()))
                except (ValueError, KeyError, TypeError, AttributeError):
                    raise DownloadError(
                        f"{ref.repo_id}/{INDEX_FILE}: not a valid shard index"
                    ) from None
        return shards, shape

    # ---- pulling -------------------------------------------------------------------------

    def pull(self, ref_text: str, plan: PullPlan | None = None) -> PullResult:
        """Pull a reference (org/repo[:QUANT], org/repo/file.gguf or a catalog name)."""
        from ember.models.starter import STARTER_NAME, starter_installed

        if ref_text == STARTER_NAME and starter_installed():
            resolved = self.registry.resolve(STARTER_NAME)
            self.on_note(f"{STARTER_NAME} is the packaged starter model: nothing to download")
            return PullResult(self.registry.get(resolved.name), 0, "starter")
        ref, alias = _parse(ref_text)
        if self.offline:
            result = self._pull_offline(ref)
        else:
            result = self._pull_online(ref, plan or self.plan(ref_text))
        if alias:
            try:
                self.registry.alias(alias, result.record.name)
            except Exception as exc:  # an alias clash must not fail a finished download
                result.notes.append(f"alias {alias} not set: {exc}")
        return result

    def _pull_online(self, ref: PullRef, plan: PullPlan) -> PullResult:
        choice, folder = plan.choice, plan.folder
        cached = self._in_hf_cache(ref.repo_id, plan.commit, choice)
        if cached is not None:
            self.on_note(f"found in the Hugging Face cache: {cached}")
            record = self._register(ref, plan.commit, choice, cached, owned=False)
            return PullResult(record, 0, "hf-cache", plan)
        if not plan.fit.disk_ok:
            raise DownloadError(
                f"{ref}: not enough disk space in {folder}: needs {plan.fit.disk_needed_bytes} bytes, "
                f"{plan.fit.disk_free_bytes} free"
            )
        downloaded = 0
        for f in sorted(choice.files, key=lambda f: f.size_bytes or 0):
            if not _complete(folder / f.path, f.size_bytes):
                downloaded += f.size_bytes or 0
            self._fetch(ref.repo_id, plan.commit, f, folder)
        path = folder / choice.files[0].path if choice.format == "gguf" else folder
        record = self._register(ref, plan.commit, choice, path, owned=True)
        return PullResult(record, downloaded, "hub" if downloaded else "ember", plan)

    def _fetch(self, repo_id: str, commit: str, f: hub.HubFile, folder: Path) -> Path:
        dest = _safe_dest(folder, f.path)
        url = hub.resolve_url(repo_id, commit, f.path)
        return self.downloader.fetch(RemoteFile(f.path, url, dest, f.size_bytes, f.sha256))

    def _in_hf_cache(self, repo_id: str, commit: str, choice: Choice) -> Path | None:
        from ember.models.hub_cache import cached_file

        paths = [cached_file(repo_id, commit, f) for f in choice.files]
        if not paths or any(p is None for p in paths):
            return None
        first = paths[0]
        assert first is not None
        if choice.format == "gguf":
            return first
        return first.parent if "/" not in choice.files[0].path else None

    def _pull_offline(self, ref: PullRef) -> PullResult:
        from ember.models.hub_cache import local_listing, snapshot_dir

        folder = repo_folder(self.registry.models_dir, ref.repo_id)
        places: list[tuple[str, Path]] = [("ember", folder)]
        if (snap := snapshot_dir(ref.repo_id, ref.revision)) is not None:
            places.append(("hf-cache", snap))
        for source, place in places:
            if not place.is_dir():
                continue
            listing = local_listing(place, ref.repo_id, ref.revision or place.name)
            try:
                choice = choose(listing, ref)
            except DownloadError:
                continue
            path = place / choice.files[0].path if choice.format == "gguf" else place
            commit = ref.revision or (place.name if source == "hf-cache" else "")
            owned = source == "ember"
            record = self._register(ref, commit, choice, path, owned=owned)
            return PullResult(record, 0, source)
        raise DownloadError(
            f"{ref}: offline (--offline or HF_HUB_OFFLINE=1) and not on this machine: not in "
            f"Ember's models folder ({folder}) nor the Hugging Face cache ({hub.hf_cache_dir()}); "
            "pull it once while online"
        )

    def _register(
        self, ref: PullRef, commit: str, choice: Choice, path: Path, owned: bool
    ) -> ModelRecord:
        """Validate what arrived (inspect_model) and add it to the registry."""
        from ember.models.inspect import inspect_model

        try:
            info = inspect_model(path)
        except ModelFileError as exc:
            raise DownloadError(
                f"{ref}: the downloaded files are not a usable model: {exc}"
            ) from None
        single = choice.format == "gguf" and len(choice.files) == 1
        record = ModelRecord(
            name=record_name(ref.repo_id, choice),
            path=path,
            format=choice.format,
            architecture=info.architecture,
            parameters=info.n_params,
            quant=choice.label if choice.format == "gguf" else None,
            sha256=choice.files[0].sha256 if single else None,
            source_repo=ref.repo_id,
            source_revision=commit or None,
            source_file=choice.files[0].path if choice.format == "gguf" else None,
            owned=owned,
        )
        return self.registry.register(record)


def _parse(ref_text: str) -> tuple[PullRef, str | None]:
    """A PullRef, and the catalog name to alias when ref_text was one."""
    if "/" not in ref_text:
        from ember.models.hub_catalog import catalog_entry

        entry = catalog_entry(ref_text.split(":", 1)[0])
        quant = ref_text.split(":", 1)[1] if ":" in ref_text else entry.quant
        text = f"{entry.repo}:{quant}" if quant else entry.repo
        return parse_ref(text), entry.name
    return parse_ref(ref_text), None


def _complete(path: Path, size_bytes: int | None) -> bool:
    return path.is_file() and (size_bytes is None or path.stat().st_size == size_bytes)


def _safe_dest(folder: Path, repo_path: str) -> Path:
    """folder/repo_path, refusing anything that resolves outside folder."""
    from ember.models.hub_select import check_safe_path

    check_safe_path(repo_path)
    dest = (folder / repo_path).resolve()
    if not dest.is_relative_to(folder.resolve()):
        raise DownloadError(f"refusing Hub file name {repo_path!r}: escapes {folder}")
    return folder / repo_path


__all__ = ["PullPlan", "PullResult", "Puller", "record_name", "repo_folder"]
