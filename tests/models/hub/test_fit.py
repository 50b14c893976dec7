"""The fit estimate's KV shape from the first bytes of a GGUF (models/files' own parser, in its
prefix mode) and from a config.json."""

from __future__ import annotations

from pathlib import Path

import pytest

from ember.models.files.gguf import open_gguf
from ember.models.hub.fit import HEADER_PEEK_BYTES, Shape, shape_from_gguf_header
from tests.fixtures.quick_gguf import write_tiny_gguf


def test_shape_from_a_prefix_matches_the_whole_file(tmp_path: Path) -> None:
    path = write_tiny_gguf(tmp_path / "m.gguf", "gemma3", n_vocab=3000)
    hp = open_gguf(path).check_supported()
    raw = path.read_bytes()
    expected = Shape(hp.n_layers, hp.n_kv_heads, hp.head_dim)
    assert shape_from_gguf_header(raw) == expected
    assert shape_from_gguf_header(raw[:HEADER_PEEK_BYTES]) == expected
    cut = raw.index(b"tokenizer.ggml.tokens")  # the prefix ends inside the vocabulary
    assert shape_from_gguf_header(raw[: cut + 40]) == expected


@pytest.mark.parametrize(
    "head", [b"", b"GGUF", b"GGML" + b"\0" * 100, b"GGUF\x03\0\0\0" + b"\xff" * 40]
)
def test_unreadable_headers_give_no_shape(head: bytes) -> None:
    assert shape_from_gguf_header(head) is None


def test_a_prefix_cut_before_the_sizes_gives_no_shape(tmp_path: Path) -> None:
    raw = write_tiny_gguf(tmp_path / "m.gguf", "llama").read_bytes()
    assert shape_from_gguf_header(raw[: raw.index(b"llama.block_count")]) is None
