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


def test_the_kv_term_uses_the_chosen_cache_types_bytes(tmp_path: Path) -> None:
    """f16 2 bytes a value, q8 (q8_0) 34/32, q4 (q4_0) 18/32: the pull's RAM estimate shrinks."""
    from ember.models.hub.fit import estimate

    shape = Shape(layers=18, kv_heads=1, head_dim=256)  # the starter model
    assert shape.kv_bytes(4096) == 18 * 256 * 2 * 2 * 4096
    assert shape.kv_bytes(4096, "q8") == 18 * 256 * 2 * 34 // 32 * 4096
    assert shape.kv_bytes(4096, "q4") == 18 * 256 * 2 * 18 // 32 * 4096
    fits = {k: estimate(250 << 20, shape, 32768, 0, tmp_path, k) for k in ("f16", "q8", "q4")}
    assert fits["q8"].kv_bytes is not None and fits["f16"].kv_bytes is not None
    assert fits["q8"].kv_bytes < fits["f16"].kv_bytes * 0.55
    assert fits["q4"].ram_needed_bytes < fits["q8"].ram_needed_bytes < fits["f16"].ram_needed_bytes
    assert fits["q4"].to_dict()["kv_cache"] == "q4"
    with pytest.raises(ValueError, match="kv cache 'q2'"):
        shape.kv_bytes(16, "q2")
