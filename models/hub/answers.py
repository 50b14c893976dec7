"""What the Hub answered, checked before Ember acts on it: one line naming the field otherwise.

huggingface_hub turns the JSON into objects without checking types, and a captive portal, a
proxy or a wrong HF_ENDPOINT can answer anything. `listing_from_info` checks every field Ember
uses (commit, file names, sizes, digests) and `malformed` turns a parse failure into a
DownloadError that says where the answer came from.
"""

from __future__ import annotations

import re
from typing import Any

from ember.models.errors import DownloadError
from ember.text import describe, escape

_HEX = re.compile(r"^[0-9a-f]+$")
_MAX_NAME_CHARS = 1024  # a whole repo path; each part is checked against the file system later


def malformed(what: str, endpoint: str, exc: BaseException) -> DownloadError:
    """The answer could not be parsed at all (HTML, a list, a truncated body...)."""
    return DownloadError(
        f"{what}: {endpoint} did not answer a Hub listing ({describe(exc)}); check HF_ENDPOINT "
        "and the network (a captive portal or proxy login answers with a web page)"
    )


FileFields = tuple[str, int | None, str | None, str | None]  # path, size, sha256, git blob id


def listing_fields(repo_id: str, info: Any) -> tuple[str | None, list[FileFields]]:
    """The commit and each file's (path, size, sha256, blob id), every one type- and
    range-checked; DownloadError naming the first bad field."""
    commit = getattr(info, "sha", None)
    if commit is not None and not _is_hex(commit, 40, 64):
        raise _bad(repo_id, "sha", commit, "a commit id (40 hex digits)")
    siblings = getattr(info, "siblings", None) or []
    if not isinstance(siblings, list):
        raise _bad(repo_id, "siblings", siblings, "a list of files")
    files: list[FileFields] = []
    for i, sibling in enumerate(siblings):
        name = getattr(sibling, "rfilename", None)
        if not isinstance(name, str) or not name or len(name) > _MAX_NAME_CHARS:
            raise _bad(repo_id, f"siblings[{i}].rfilename", name, "a file name")
        size = getattr(sibling, "size", None)
        if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size < 0):
            raise _bad(repo_id, f"siblings[{i}].size", size, "a size in bytes (>= 0)")
        lfs = getattr(sibling, "lfs", None)
        sha256 = getattr(lfs, "sha256", None) if lfs is not None else None
        if sha256 is not None and not _is_hex(sha256, 64, 64):
            raise _bad(repo_id, f"siblings[{i}].lfs.sha256", sha256, "a SHA-256 (64 hex digits)")
        blob = getattr(sibling, "blob_id", None)
        if blob is not None and not _is_hex(blob, 40, 64):
            raise _bad(repo_id, f"siblings[{i}].blobId", blob, "a git object id")
        files.append((name, size, sha256, blob))
    return commit, files


def _is_hex(value: Any, min_len: int, max_len: int) -> bool:
    return (
        isinstance(value, str)
        and min_len <= len(value) <= max_len
        and _HEX.match(value.lower()) is not None
    )


def _bad(repo_id: str, field: str, value: Any, expected: str) -> DownloadError:
    shown = escape(repr(value))
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    return DownloadError(
        f"{repo_id}: the Hub's listing is malformed: {field} is {shown}, not {expected}"
    )
