"""The fake Hub answers huggingface_hub's own calls the way the real Hub does."""

from __future__ import annotations

import hashlib

from tests.models.hub.hub_server import HubServer


def test_tree_info_and_file_metadata(hub: HubServer) -> None:
    from huggingface_hub import HfApi, get_hf_file_metadata, hf_hub_url

    data = b"w" * 3000
    repo = hub.add_repo("org/r", {"sub/m-Q4_0.gguf": data, "config.json": b"{}"})
    api = HfApi(endpoint=hub.url)
    tree = {f.path: f for f in api.list_repo_tree("org/r", recursive=True)}
    assert tree["sub/m-Q4_0.gguf"].lfs.sha256 == hashlib.sha256(data).hexdigest()  # type: ignore[union-attr]
    assert tree["config.json"].lfs is None and tree["config.json"].size == 2  # type: ignore[union-attr]
    info = api.model_info("org/r", revision=repo.commit, files_metadata=True)
    assert info.sha == repo.commit
    meta = get_hf_file_metadata(hf_hub_url("org/r", "sub/m-Q4_0.gguf", endpoint=hub.url))
    assert meta.commit_hash == repo.commit and meta.size == len(data)
    assert meta.etag == hashlib.sha256(data).hexdigest()
    assert ("HEAD", "/org/r/resolve/main/sub/m-Q4_0.gguf", None) in hub.state.requests
