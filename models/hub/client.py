"""The Hugging Face Hub, read through `huggingface_hub`: settings, repo listings, search, errors.

Environment is read at call time (not at import) so `HF_ENDPOINT`, `HF_HUB_OFFLINE`, `HF_TOKEN`
and `HF_HOME` apply to each call. File transfer is models/hub/download.py's job.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from ember.models.errors import DownloadError
from ember.models.hub.answers import listing_fields, malformed

DEFAULT_ENDPOINT = "https://huggingface.co"


@dataclass(frozen=True)
class HubFile:
    """One file of a repo: its path, size and the LFS SHA-256 the Hub publishes (None if not LFS)."""

    path: str
    size_bytes: int | None
    sha256: str | None
    git_sha1: str | None = None  # git blob id (what the Hub publishes for non-LFS files)


@dataclass(frozen=True)
class RepoListing:
    """A repo at one commit and its files."""

    repo_id: str
    commit: str
    files: list[HubFile] = field(default_factory=list)

    def file(self, path: str) -> HubFile | None:
        """The file at path, or None."""
        return next((f for f in self.files if f.path == path), None)


@dataclass(frozen=True)
class SearchHit:
    """One search result."""

    repo_id: str
    downloads: int
    likes: int
    formats: list[str]  # "gguf" and/or "safetensors" when the tags say so
    tags: list[str]
    storage_bytes: int | None = None  # all files of the repo (every quant)
    parameters: int | None = None
    architecture: str | None = None

    def to_dict(self) -> dict[str, object]:
        """JSON-ready."""
        return {
            "repo": self.repo_id,
            "downloads": self.downloads,
            "likes": self.likes,
            "formats": self.formats,
            "storage_bytes": self.storage_bytes,
            "parameters": self.parameters,
            "architecture": self.architecture,
        }


def endpoint() -> str:
    """The Hub URL (HF_ENDPOINT in tests)."""
    return os.environ.get("HF_ENDPOINT", DEFAULT_ENDPOINT).rstrip("/")


def is_offline(flag: bool = False) -> bool:
    """True with --offline or HF_HUB_OFFLINE=1 (then nothing touches the network)."""
    value = os.environ.get("HF_HUB_OFFLINE", "")
    return flag or value.strip().lower() in ("1", "true", "yes", "on")


def hf_cache_dir() -> Path:
    """The Hugging Face hub cache folder (HF_HUB_CACHE, else HF_HOME/hub)."""
    if cache := os.environ.get("HF_HUB_CACHE"):
        return Path(cache).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", "~/.cache"), "huggingface"
    )
    return Path(home).expanduser() / "hub"


def token() -> str | None:
    """The Hub token (HF_TOKEN, or the one saved by `hf auth login`)."""
    if value := os.environ.get("HF_TOKEN"):
        return value
    from huggingface_hub import get_token

    return get_token()


def request_headers() -> dict[str, str]:
    """Headers for file transfer: user agent and the token when there is one."""
    from ember import __version__

    headers = {"User-Agent": f"ember/{__version__}", "Accept-Encoding": "identity"}
    if value := token():
        headers["Authorization"] = f"Bearer {value}"
    return headers


def resolve_url(repo_id: str, revision: str, path: str) -> str:
    """The download URL of one file at one revision."""
    return f"{endpoint()}/{repo_id}/resolve/{quote(revision, safe='')}/{quote(path)}"


def _api() -> object:
    from huggingface_hub import HfApi

    _fail_fast_once()
    return HfApi(endpoint=endpoint(), token=token() or False)


class HubUnreachable(OSError):
    """No connection to the Hub could be made (refused, no route, no DNS, connect timeout)."""


CONNECT_TIMEOUT_S = 10.0  # a Hub that does not accept a connection by then is unreachable
READ_TIMEOUT_S = 60.0
_fail_fast_installed = False


def _fail_fast_once() -> None:
    """Make huggingface_hub give up on the first failed connection.

    Its paginated calls (search) go through `http_backoff`, which retries connection errors and
    timeouts five times (1 + 2 + 4 + 8 + 8 s: `ember search` offline took 23 s to say so). The
    documented knob is the HTTP client factory: ours wraps the transport so a failed connect
    raises HubUnreachable, which the backoff does not retry, and caps the connect wait (the
    library's default client has no timeout at all). HTTP statuses (429, 5xx) still retry.
    """
    global _fail_fast_installed
    if _fail_fast_installed:
        return
    import huggingface_hub
    from huggingface_hub.utils import _http as hub_http

    set_factory = getattr(huggingface_hub, "set_client_factory", None)
    httpx_module = getattr(hub_http, "httpx2", None) or getattr(hub_http, "httpx", None)
    if set_factory is None or httpx_module is None:  # an older huggingface_hub (requests)
        _fail_fast_installed = True
        return
    connect_errors = (httpx_module.ConnectError, httpx_module.ConnectTimeout)

    class FailFastTransport(httpx_module.HTTPTransport):  # type: ignore[name-defined]
        def handle_request(self, request: object) -> object:
            try:
                return super().handle_request(request)
            except connect_errors as exc:
                raise HubUnreachable(str(exc) or type(exc).__name__) from None

    hook = getattr(hub_http, "hf_request_event_hook", None)  # offline mode, request ids

    def factory() -> object:
        return httpx_module.Client(
            transport=FailFastTransport(),
            event_hooks={"request": [hook]} if hook else {},
            follow_redirects=True,
            timeout=httpx_module.Timeout(READ_TIMEOUT_S, connect=CONNECT_TIMEOUT_S),
        )

    set_factory(factory)
    _fail_fast_installed = True


@contextmanager
def hub_errors(what: str) -> Iterator[None]:
    """Turn huggingface_hub and network errors into one-line DownloadErrors naming `what`."""
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    from ember.models.hub.download import auth_hint

    try:
        yield
    except GatedRepoError:
        raise DownloadError(f"{what}: {auth_hint(403)}") from None
    except RevisionNotFoundError:
        raise DownloadError(f"{what}: revision not found on the Hub") from None
    except RepositoryNotFoundError as exc:
        status = exc.response.status_code if exc.response is not None else 404
        hint = (
            f"; if it is private or gated, {auth_hint(status).split(': ', 1)[1]}"
            if status == 401
            else ""
        )
        raise DownloadError(f"{what}: repository not found on the Hub{hint}") from None
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else 0
        if status in (401, 403):
            raise DownloadError(f"{what}: {auth_hint(status)}") from None
        if status == 404:
            raise DownloadError(f"{what}: not found on the Hub (HTTP 404)") from None
        raise DownloadError(f"{what}: the Hub answered HTTP {status}; try again later") from None
    except OfflineModeIsEnabled:
        raise DownloadError(f"{what}: offline mode is on (HF_HUB_OFFLINE=1)") from None
    except Exception as exc:  # the HTTP client's own errors (httpx/httpx2/requests) and OSError
        if not isinstance(exc, OSError) and type(exc).__module__.split(".")[0] not in _HTTP_LIBS:
            raise
        raise DownloadError(
            f"{what}: cannot reach the Hub at {endpoint()} ({type(exc).__name__}: {exc})"
        ) from None


_HTTP_LIBS = ("httpx", "httpx2", "httpcore", "httpcore2", "requests", "urllib3")


def _sync_offline() -> None:
    """huggingface_hub reads HF_HUB_OFFLINE once at import; Ember decides per call instead."""
    from huggingface_hub import constants

    constants.HF_HUB_OFFLINE = is_offline()


def list_repo(repo_id: str, revision: str | None = None) -> RepoListing:
    """The repo's commit and files with sizes and LFS digests (one model_info call)."""
    if is_offline():
        raise DownloadError(f"{repo_id}: offline mode is on; cannot list the repo on the Hub")
    _sync_offline()
    with hub_errors(repo_id):
        try:
            info = _api().model_info(repo_id, revision=revision, files_metadata=True)  # type: ignore[attr-defined]
        except (ValueError, TypeError, KeyError, AttributeError) as exc:  # not a listing at all
            raise malformed(repo_id, endpoint(), exc) from None
    commit, files = listing_fields(repo_id, info)
    return RepoListing(repo_id, commit or revision or "main", [HubFile(*f) for f in files])


def search(text: str, fmt: str | None = None, limit: int = 20) -> list[SearchHit]:
    """Hub models matching text, most downloaded first; fmt 'gguf'/'safetensors' filters by tag."""
    if is_offline():
        raise DownloadError("search: offline mode is on (HF_HUB_OFFLINE=1 or --offline)")
    _sync_offline()
    what = f"search {text!r}"
    with hub_errors(what):
        try:
            models = list(
                _api().list_models(  # type: ignore[attr-defined]
                    search=text or None, filter=fmt, sort="downloads", limit=limit, expand=_EXPAND
                )
            )
            return [_hit(m) for m in models]
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise malformed(what, endpoint(), exc) from None


_EXPAND = ["downloads", "likes", "tags", "usedStorage", "gguf", "safetensors"]


def _hit(m: object) -> SearchHit:
    tags = list(getattr(m, "tags", None) or [])
    formats = [f for f in ("gguf", "safetensors") if f in tags]
    gguf = getattr(m, "gguf", None) or {}
    st = getattr(m, "safetensors", None)
    params = gguf.get("total") if isinstance(gguf, dict) else None
    if params is None and st is not None:
        params = getattr(st, "total", None)
    return SearchHit(
        repo_id=str(getattr(m, "id", "")),
        downloads=int(getattr(m, "downloads", 0) or 0),
        likes=int(getattr(m, "likes", 0) or 0),
        formats=formats,
        tags=tags,
        storage_bytes=getattr(m, "used_storage", None),
        parameters=int(params) if params is not None else None,
        architecture=gguf.get("architecture") if isinstance(gguf, dict) else None,
    )
