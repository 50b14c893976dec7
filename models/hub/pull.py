"""`ember pull`: list a repo, choose the files, check the fit, download (or reuse), register.

Downloads land in `<models_dir>/hub/<org>--<repo>/<path in repo>`; files already in the Hugging
Face cache are registered in place instead. Offline (`--offline` / HF_HUB_OFFLINE=1) only looks
at the disk and says what is missing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ember.models.errors import DownloadError, ModelFileError
from ember.models.hub import client as hub
from ember.models.hub.download import Downloader, ProgressCallback, RemoteFile
from ember.models.hub.plan import SAFETENSORS_DIR, PullPlan, complete, make_plan, repo_folder
from ember.models.hub.select import Choice, PullRef, choose, parse_ref
from ember.models.quants.kv_cache import DEFAULT_KV_CACHE
from ember.models.registry.registry import Registry
from ember.models.registry.store import ModelRecord


@dataclass
class PullResult:
    """A finished pull: the registry record, bytes downloaded and where the files came from."""

    record: ModelRecord
    downloaded_bytes: int = 0
    source: str = "hub"  # "hub" | "ember" (already downloaded) | "hf-cache" | "starter"
    plan: PullPlan | None = None
    notes: list[str] = field(default_factory=list)


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
        registry: Registry,
        *,
        offline: bool = False,
        ctx: int = 4096,
        kv_cache: str = DEFAULT_KV_CACHE,  # the fit estimate's KV cache type (f16, q8, q4)
        on_progress: ProgressCallback | None = None,
        on_note: Callable[[str], None] | None = None,
        cancel: threading.Event | None = None,
        downloader: Downloader | None = None,
    ) -> None:
        self.registry = registry
        self.offline = hub.is_offline(offline)
        self.ctx = ctx
        self.kv_cache = kv_cache
        self.on_note = on_note or (lambda _text: None)
        self.downloader = downloader or Downloader(hub.request_headers(), on_progress, cancel)

    # ---- planning ------------------------------------------------------------------------

    def plan(self, ref_text: str) -> PullPlan:
        """List the repo and choose the files (network); nothing is downloaded but small headers."""
        ref, _alias = _parse(ref_text)
        if self.offline:
            raise DownloadError(f"{ref}: offline mode is on; cannot list the repo on the Hub")
        listing = hub.list_repo(ref.repo_id, ref.revision)
        return make_plan(
            ref,
            listing,
            self.registry.models_dir,
            self.ctx,
            lambda f, folder: self._fetch(ref.repo_id, listing.commit, f, folder),
            self.kv_cache,
        )

    # ---- pulling -------------------------------------------------------------------------

    def pull(self, ref_text: str, plan: PullPlan | None = None) -> PullResult:
        """Pull a reference (org/repo[:QUANT], org/repo/file.gguf or a catalog name)."""
        from ember.models.registry.starter import STARTER_NAME, STARTER_SIBLING, starter_installed

        if ref_text == STARTER_NAME and starter_installed():
            resolved = self.registry.resolve(STARTER_NAME)
            self.on_note(f"{STARTER_NAME} is the packaged starter model: nothing to download")
            return PullResult(self.registry.get(resolved.name), 0, "starter")
        if ref_text == STARTER_NAME:
            raise DownloadError(
                f"{STARTER_NAME} is the packaged starter model (pretrained), not a download: "
                f"pip install 'ember[starter]', or pull its instruction-tuned sibling "
                f"{STARTER_SIBLING}"
            )
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
            if not complete(folder / f.path, f.size_bytes):
                downloaded += f.size_bytes or 0
            self._fetch(ref.repo_id, plan.commit, f, folder)
        path = folder / choice.files[0].path if choice.format == "gguf" else folder
        record = self._register(ref, plan.commit, choice, path, owned=True)
        return PullResult(record, downloaded, "hub" if downloaded else "ember", plan)

    def _fetch(self, repo_id: str, commit: str, f: hub.HubFile, folder: Path) -> Path:
        dest = _safe_dest(folder, f.path)
        url = hub.resolve_url(repo_id, commit, f.path)
        return self.downloader.fetch(
            RemoteFile(f.path, url, dest, f.size_bytes, f.sha256, f.git_sha1)
        )

    def _in_hf_cache(self, repo_id: str, commit: str, choice: Choice) -> Path | None:
        from ember.models.hub.cache import cached_file

        paths = [cached_file(repo_id, commit, f) for f in choice.files]
        if not paths or any(p is None for p in paths):
            return None
        first = paths[0]
        assert first is not None
        if choice.format == "gguf":
            return first
        return first.parent if "/" not in choice.files[0].path else None

    def _pull_offline(self, ref: PullRef) -> PullResult:
        from ember.models.hub.cache import local_listing, snapshot_dir

        folder = repo_folder(self.registry.models_dir, ref.repo_id)
        places: list[tuple[str, Path]] = [("ember", folder), ("ember", folder / SAFETENSORS_DIR)]
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
        from ember.models.files.inspect import inspect_model

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
        from ember.models.hub.catalog import catalog_entry

        entry = catalog_entry(ref_text.split(":", 1)[0])
        quant = ref_text.split(":", 1)[1] if ":" in ref_text else entry.quant
        text = f"{entry.repo}:{quant}" if quant else entry.repo
        return parse_ref(text), entry.name
    return parse_ref(ref_text), None


def _safe_dest(folder: Path, repo_path: str) -> Path:
    """folder/repo_path, refusing anything that resolves outside folder."""
    from ember.models.hub.select import check_safe_path

    check_safe_path(repo_path)
    dest = (folder / repo_path).resolve()
    if not dest.is_relative_to(folder.resolve()):
        raise DownloadError(f"refusing Hub file name {repo_path!r}: escapes {folder}")
    return folder / repo_path


__all__ = ["PullPlan", "PullResult", "Puller", "record_name", "repo_folder"]
