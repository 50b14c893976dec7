"""The crafted-bad-GGUF corpus: every header check, and truncation at every section."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from ember.models.errors import ModelFileError
from ember.models.files.gguf import open_gguf
from tests.fixtures.quick_gguf import write_tiny_gguf
from tests.models.files.badfiles.corpus import (
    BAD_CASES,
    HUGE_DECLARED,
    MOE_BAD_CASES,
    truncation_points,
)
from tests.models.files.badfiles.layout import GGUFSpec, build, key_of, kv_u32, spec_from_file


@pytest.fixture(scope="module")
def valid(tmp_path_factory: pytest.TempPathFactory) -> tuple[GGUFSpec, bytes, dict[str, int]]:
    path = write_tiny_gguf(tmp_path_factory.mktemp("valid") / "tiny.gguf", "llama")
    spec = spec_from_file(path)
    raw, sections = build(spec)
    assert raw == path.read_bytes()  # the corpus builder reproduces a valid file exactly
    return spec, raw, sections


def _expect_error(path: Path, fragment: str) -> str:
    with pytest.raises(ModelFileError) as info:
        open_gguf(path)
    message = str(info.value)
    assert message.startswith(f"{path.name}: "), message
    assert "\n" not in message
    assert fragment in message, message
    return message


def test_corpus_is_large_enough() -> None:
    assert len(BAD_CASES) >= 25


def test_valid_file_opens(valid: tuple[GGUFSpec, bytes, dict[str, int]], tmp_path: Path) -> None:
    path = tmp_path / "ok.gguf"
    path.write_bytes(valid[1])
    assert open_gguf(path).architecture == "llama"


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_bad_file(case: str, valid: tuple[GGUFSpec, bytes, dict[str, int]], tmp_path: Path) -> None:
    edit, fragment = BAD_CASES[case]
    spec = valid[0].copy()
    edit(spec)
    path = tmp_path / f"{case}.gguf"
    path.write_bytes(build(spec)[0])
    _expect_error(path, fragment)


@pytest.fixture(scope="module")
def valid_moe(tmp_path_factory: pytest.TempPathFactory) -> GGUFSpec:
    path = write_tiny_gguf(tmp_path_factory.mktemp("moe") / "tiny-moe.gguf", "qwen3moe")
    assert open_gguf(path).check_supported().n_experts == 4
    return spec_from_file(path)


@pytest.mark.parametrize("case", sorted(MOE_BAD_CASES))
def test_bad_moe_file(case: str, valid_moe: GGUFSpec, tmp_path: Path) -> None:
    edit, fragment = MOE_BAD_CASES[case]
    spec = valid_moe.copy()
    edit(spec)
    path = tmp_path / f"{case}.gguf"
    path.write_bytes(build(spec)[0])
    _expect_error(path, fragment)


def test_truncation_at_every_section(
    valid: tuple[GGUFSpec, bytes, dict[str, int]], tmp_path: Path
) -> None:
    spec, raw, sections = valid
    points = truncation_points(sections)
    tokens_kv = next(i for i, e in enumerate(spec.kvs) if key_of(e) == b"tokenizer.ggml.tokens")
    points["in_token_array"] = sections[f"kv{tokens_kv}"] + 60
    points["in_token_array_late"] = sections[f"kv{tokens_kv + 1}"] - 3
    assert len(set(points.values())) == len(points)
    for where, cut in points.items():
        path = tmp_path / f"cut_{where}.gguf"
        path.write_bytes(raw[:cut])
        message = _expect_error(path, "truncated")
        assert f"file has {cut}" in message or "bytes left" in message, (where, message)


def test_empty_and_missing_files(tmp_path: Path) -> None:
    empty = tmp_path / "empty.gguf"
    empty.write_bytes(b"")
    _expect_error(empty, "empty file")
    with pytest.raises(ModelFileError, match="no such file"):
        open_gguf(tmp_path / "absent.gguf")
    with pytest.raises(ModelFileError, match="is a folder"):
        open_gguf(tmp_path)


@pytest.mark.parametrize("case", HUGE_DECLARED)
def test_memory_does_not_follow_declared_sizes(
    case: str, valid: tuple[GGUFSpec, bytes, dict[str, int]], tmp_path: Path
) -> None:
    edit, fragment = BAD_CASES[case]
    spec = valid[0].copy()
    edit(spec)
    path = tmp_path / f"{case}.gguf"
    path.write_bytes(build(spec)[0])
    _expect_error(path, fragment)  # warm imports outside the measurement
    tracemalloc.start()
    try:
        with pytest.raises(ModelFileError):
            open_gguf(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # declared sizes reach 2**62; what we allocate stays below the (100 KB) file's size
    assert peak < 512 * 1024, peak


def test_large_string_arrays_stay_lazy_and_bounded(tmp_path: Path) -> None:
    """A 3000-token vocabulary is walked, not decoded, at open; faults still name the item."""
    path = write_tiny_gguf(tmp_path / "big_vocab.gguf", "llama", n_vocab=3000)
    model = open_gguf(path)
    assert "tokenizer.ggml.tokens" in model.array_keys
    assert "tokenizer.ggml.tokens" not in model.metadata
    tokens = model.metadata_array("tokenizer.ggml.tokens")
    assert len(tokens) == 3000 and tokens[1] == "<s>" and tokens[-1] == "t2999"
    raw = path.read_bytes()
    item = raw.index(b"t1500") - 8  # the u64 length in front of token 1500
    last = raw.index(b"t2999") - 8
    cases = {
        "cut_in_count_bound": (raw[: item + 4], "tokenizer.ggml.tokens declares 3000 items"),
        "cut_at_last_item": (raw[: last + 4], "tokenizer.ggml.tokens[2999] length needs 8 bytes"),
        "huge_length": (
            raw[:item] + (1 << 62).to_bytes(8, "little") + raw[item + 8 :],
            "truncated: metadata tokenizer.ggml.tokens[1500]",
        ),
    }
    for case, (content, fragment) in cases.items():
        bad = tmp_path / f"{case}.gguf"
        bad.write_bytes(content)
        _expect_error(bad, fragment)
    bad_utf8 = tmp_path / "utf8.gguf"
    bad_utf8.write_bytes(raw[: item + 8] + b"\xff" + raw[item + 9 :])
    model = open_gguf(bad_utf8)  # opening does not decode the vocabulary...
    with pytest.raises(ModelFileError, match=r"tokenizer.ggml.tokens\[1500\] is not valid UTF-8"):
        model.metadata_array("tokenizer.ggml.tokens")  # ...reading it does


def test_special_token_outside_the_vocabulary_counts_as_absent(
    valid: tuple[GGUFSpec, bytes, dict[str, int]], tmp_path: Path
) -> None:
    spec = valid[0].copy()
    spec.set_kv("tokenizer.ggml.eos_token_id", kv_u32("tokenizer.ggml.eos_token_id", 70000))
    path = tmp_path / "eos.gguf"
    path.write_bytes(build(spec)[0])
    tok = open_gguf(path).tokenizer
    assert tok.eos_id is None and tok.bos_id == 1  # as llama.cpp: warn-worthy, not fatal
