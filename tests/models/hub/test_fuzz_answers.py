"""Fuzz: whatever the Hub (or a portal pretending to be it) answers, a listing is either fully
typed or one DownloadError; through the real HTTP client against the local Hub stand-in."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ember.models.errors import DownloadError
from ember.models.hub import client
from tests.fuzz import FUZZ
from tests.models.hub.hub_server import HubServer

REPO = "org/fuzz"
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(1 << 70), 1 << 70) | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)  # fmt: skip
siblings = st.lists(
    st.fixed_dictionaries(
        {},
        optional={
            "rfilename": st.one_of(json_values, st.sampled_from(["a.gguf", "x" * 2000, "../up"])),
            "size": st.one_of(json_values, st.integers(-5, 1 << 40)),
            "blobId": st.one_of(json_values, st.just("a" * 40)),
            "lfs": st.one_of(
                json_values,
                st.fixed_dictionaries({"sha256": st.one_of(json_values, st.just("b" * 64)),
                                       "size": json_values}),
            ),
        },
    ),
    max_size=4,
) | json_values  # fmt: skip


@pytest.fixture(scope="module")
def hub() -> Iterator[HubServer]:
    with HubServer() as server:
        server.add_repo(REPO, {"a.gguf": b"GGUF"})
        yield server


@FUZZ
@given(files=siblings, commit=st.one_of(json_values, st.just("c" * 40)))
def test_any_listing_is_typed_or_one_line(
    hub: HubServer, monkeypatch: pytest.MonkeyPatch, files: Any, commit: Any
) -> None:
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    hub.state.info_patches[REPO] = lambda answer: answer | {"siblings": files, "sha": commit}
    try:
        listing = client.list_repo(REPO)
    except DownloadError as exc:
        assert "\n" not in str(exc) and str(exc).startswith(REPO)
        return
    assert re.fullmatch(r"[0-9a-f]{40,64}|main", listing.commit)
    for f in listing.files:
        assert isinstance(f.path, str) and f.path
        assert f.size_bytes is None or (type(f.size_bytes) is int and f.size_bytes >= 0)
        assert f.sha256 is None or re.fullmatch(r"[0-9a-fA-F]{64}", f.sha256)
