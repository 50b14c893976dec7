"""Fuzzing open_gguf: random truncations, byte flips and huge integers planted in the header.

Whatever the bytes, only ModelFileError may escape, and memory never follows declared sizes.
"""

from __future__ import annotations

import struct
import tracemalloc
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ember.models.errors import ModelFileError
from ember.models.files.gguf import open_gguf
from tests.fixtures.quick_gguf import write_tiny_gguf
from tests.models.files.badfiles.layout import build, spec_from_file

PEAK_LIMIT = 2 * 1024 * 1024  # the valid file is ~100 KB and memory-mapped


@dataclass(frozen=True)
class Valid:
    raw: bytes
    header_end: int  # where tensor data starts: flips before it hit the header
    path: Path  # where each fuzzed file is written

    def __repr__(self) -> str:  # keeps hypothesis' failure report readable
        return f"Valid({len(self.raw)} bytes, header_end={self.header_end})"


@pytest.fixture(scope="module", params=[32, 1100], ids=["vocab32", "vocab1100"])
def valid(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Valid:
    """A small vocabulary (decoded at open) and a large one (walked, decoded lazily)."""
    folder = tmp_path_factory.mktemp("fuzz")
    path = write_tiny_gguf(folder / "tiny.gguf", "gemma3", n_vocab=request.param)
    raw, sections = build(spec_from_file(path))
    open_gguf(path)  # imports and caches warm before any measurement
    return Valid(raw, sections["data"], folder / "fuzzed.gguf")


def _mutations(header_end: int, size: int) -> st.SearchStrategy:
    pos_header = st.integers(0, header_end - 1)
    flip = st.tuples(st.just("byte"), pos_header | st.integers(0, size - 1), st.integers(0, 255))
    huge = st.tuples(
        st.just("u64"),
        pos_header,
        st.sampled_from([1 << 63, (1 << 64) - 1, 1 << 40, 1 << 32, 0xFFFF_FFFF, 64, 0]),
    )
    return st.tuples(
        st.lists(flip | huge, min_size=0, max_size=6),
        st.none() | st.integers(0, size),
    )


def _apply(raw: bytes, edits: list[tuple[str, int, int]], cut: int | None) -> bytes:
    data = bytearray(raw)
    for kind, pos, value in edits:
        if kind == "byte":
            data[pos] = value
        elif pos + 8 <= len(data):
            data[pos : pos + 8] = struct.pack("<Q", value)
    return bytes(data[:cut] if cut is not None else data)


def _open_everything(path: Path) -> None:
    """Open, then touch what a runner would: every tensor view and every large array."""
    model = open_gguf(path)
    for t in model.tensors.values():
        assert t.raw.nbytes == t.nbytes
        if t.nbytes:
            int(t.raw[-1])
    for key in model.array_keys:
        model.metadata_array(key)
    _ = (model.quant_summary, model.n_params, model.tokenizer, model.hparams)


@settings(
    max_examples=200,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_only_model_file_error_escapes(data: st.DataObject, valid: Valid) -> None:
    raw, header_end, path = valid.raw, valid.header_end, valid.path
    edits, cut = data.draw(_mutations(header_end, len(raw)))
    path.write_bytes(_apply(raw, edits, cut))
    tracemalloc.start()
    try:
        try:
            _open_everything(path)
        except ModelFileError as exc:
            message = str(exc)
            assert message.startswith(f"{path.name}: ") and "\n" not in message, message
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < PEAK_LIMIT, (edits, cut, peak)
